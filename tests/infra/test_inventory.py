"""The data account's Blob Inventory policy, as registered under mocks."""

from __future__ import annotations

from typing import Any

import pytest

from blob_safetynet.infra.inventory import RULE_NAME
from blob_safetynet.reconcile.inventory_report import (
    REQUIRED_FIELDS,
    InventoryConfigError,
    _check_definition,
)
from blob_safetynet.recover.inventory import RecoverRule
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.vocabulary import (
    DEFAULT_INVENTORY_CONTAINER,
    INVENTORY_SCHEMA_FIELDS,
    RECOVER_INVENTORY_RULE,
)
from tests.infra.conftest import READER_ID, UPLOADER_ID, RunFactory
from tests.infra.harness import StackRun

POLICY = "azure-native:storage:BlobInventoryPolicy"
CONTAINER = "azure-native:storage:BlobContainer"
ASSIGNMENT = "azure-native:authorization:RoleAssignment"


def rule(stack: StackRun, name: str = RULE_NAME) -> dict[str, Any]:
    [named] = [r for r in stack.one(POLICY).inputs["policy"]["rules"] if r["name"] == name]
    return dict(named)


def test_the_policy_holds_reconciles_rule_and_recovers(stack: StackRun) -> None:
    """The account's one inventory policy holds two rules: reconcile's and recover's."""
    names = [r["name"] for r in stack.one(POLICY).inputs["policy"]["rules"]]
    assert names == [RULE_NAME, RECOVER_INVENTORY_RULE]


def test_the_policy_reports_the_protocol_container_daily_as_parquet(stack: StackRun) -> None:
    """One enabled rule: Parquet, daily, blobs, base block blobs of the data container only."""
    policy = stack.one(POLICY).inputs
    assert policy["blobInventoryPolicyName"] == "default"
    assert policy["policy"]["enabled"] is True
    assert policy["policy"]["type"] == "Inventory"
    definition = rule(stack)["definition"]
    assert (definition["format"], definition["schedule"], definition["objectType"]) == (
        "Parquet",
        "Daily",
        "Blob",
    )
    assert definition["filters"] == {
        "blobTypes": ["blockBlob"],
        "prefixMatch": ["documents/"],
        "includeSnapshots": False,
        "includeBlobVersions": False,
        "includeDeleted": False,
    }


def test_the_rule_asks_for_every_field_the_join_reads(stack: StackRun) -> None:
    """Name, Last-Modified, Etag and Tags are among the schema fields, under the rule reconcile
    reads by default."""
    assert rule(stack)["name"] == RULE_NAME == appsettings.INVENTORY_RULE.default
    assert rule(stack)["enabled"] is True
    assert (
        set(REQUIRED_FIELDS)
        <= set(rule(stack)["definition"]["schemaFields"])
        == set(INVENTORY_SCHEMA_FIELDS)
    )


def test_the_destination_is_a_private_container_that_exists_first(stack: StackRun) -> None:
    """The reports go to a private container of their own, created before the policy."""
    [destination] = [
        c
        for c in stack.of_type(CONTAINER)
        if c.inputs["containerName"] == DEFAULT_INVENTORY_CONTAINER
    ]
    assert destination.inputs["publicAccess"] == "None"
    assert rule(stack)["destination"] == DEFAULT_INVENTORY_CONTAINER
    assert destination.name in stack.one(POLICY).depends_on


def test_readers_and_uploaders_may_read_the_reports(stack: StackRun) -> None:
    """Each reader (audit) and uploader (repair) principal holds the reader role on the
    inventory container, and no one else holds a role there."""
    assignments = [
        a for a in stack.of_type(ASSIGNMENT) if a.parent_type == "safetynet:storage:Inventory"
    ]
    assert sorted(a.inputs["principalId"] for a in assignments) == sorted([READER_ID, UPLOADER_ID])
    assert {a.inputs["roleDefinitionId"] for a in assignments} == {
        stack.outputs["readerRoleDefinitionId"]
    }


def test_report_readers_are_assigned_with_their_configured_type(stack: StackRun) -> None:
    """The inventory container's assignments name each principal's type, as configured (the
    harness reads a bare id as a ServicePrincipal), never azure-native's User default."""
    assignments = [
        a for a in stack.of_type(ASSIGNMENT) if a.parent_type == "safetynet:storage:Inventory"
    ]
    assert {a.inputs.get("principalType") for a in assignments} == {"ServicePrincipal"}


def test_the_recover_rule_reports_the_kept_copies_without_versions_by_default(
    stack: StackRun,
) -> None:
    """Recover's rule: daily Parquet block blobs of the data container with soft-deleted blobs
    and snapshots and their fields; versions and their fields only with versioning (off here)."""
    recover = rule(stack, RECOVER_INVENTORY_RULE)
    definition = recover["definition"]
    assert recover["enabled"] is True
    assert recover["destination"] == DEFAULT_INVENTORY_CONTAINER
    assert (definition["format"], definition["schedule"], definition["objectType"]) == (
        "Parquet",
        "Daily",
        "Blob",
    )
    assert definition["filters"] == {
        "blobTypes": ["blockBlob"],
        "prefixMatch": ["documents/"],
        "includeSnapshots": True,
        "includeBlobVersions": False,
        "includeDeleted": True,
    }
    fields = definition["schemaFields"]
    assert {"Name", "Content-Length", "Deleted", "RemainingRetentionDays", "Snapshot"} <= set(
        fields
    )
    assert not {"VersionId", "IsCurrentVersion", "DeletedTime", "DeletionId"} & set(fields)


def test_with_versioning_the_recover_rule_reports_versions_with_their_fields(
    run: RunFactory,
) -> None:
    """Versioning on: recover's rule includes blob versions and asks for VersionId and
    IsCurrentVersion, which ARM requires with that flag; reconcile's rule is unchanged."""
    result = run({"versioning": True})
    definition = rule(result, RECOVER_INVENTORY_RULE)["definition"]
    assert definition["filters"]["includeBlobVersions"] is True
    assert {"VersionId", "IsCurrentVersion"} <= set(definition["schemaFields"])
    assert rule(result)["definition"]["filters"]["includeBlobVersions"] is False


@pytest.mark.parametrize("versioning", [False, True])
def test_each_rule_is_read_by_its_reader_and_refused_by_the_other(
    run: RunFactory, versioning: bool
) -> None:
    """The definitions the program registers pass the check of the reader they are for, and
    each reader refuses the other's rule (a run's manifest carries its rule's definition)."""
    result = run({"versioning": versioning})
    recover = rule(result, RECOVER_INVENTORY_RULE)["definition"]
    reconcile = rule(result)["definition"]
    check = RecoverRule()
    check(recover, "documents", "recover")
    assert check.versions is versioning
    _check_definition(reconcile, "documents", "reconcile")
    with pytest.raises(InventoryConfigError, match="cannot serve reconcile"):
        _check_definition(recover, "documents", "recover")
    with pytest.raises(InventoryConfigError, match="cannot serve recover"):
        RecoverRule()(reconcile, "documents", "reconcile")
