"""The nets beside an account in a Pulumi program (adapters/pulumi_nets.py): a lock, a blob
diagnostic setting or a backup instance the stack aims at the account is judged; one the stack
lacks is UNKNOWN (it may exist outside the stack), never a PASS."""

from __future__ import annotations

from typing import Any

import pytest

from blob_safetynet.policies.adapters import pulumi_nets, pulumi_props
from blob_safetynet.policies.adapters.pulumi_props import StackResource
from blob_safetynet.policies.rules import RULES_BY_ID, Outcome
from blob_safetynet.policies.rules.model import Thresholds

ACCOUNT_ID = (
    "/subscriptions/s/resourceGroups/rg-app/providers/Microsoft.Storage/storageAccounts/docs"
)
UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
ACCOUNT = StackResource(
    pulumi_props.STORAGE_ACCOUNT,
    "docs",
    {"accountName": "docs", "resourceGroupName": "rg-app", "kind": "StorageV2"},
    id=ACCOUNT_ID,
)
LOGS = [{"category": c, "enabled": True} for c in ("StorageRead", "StorageWrite", "StorageDelete")]


def judge(rule: str, *resources: StackResource) -> tuple[Outcome, str]:
    (model,) = pulumi_props.accounts_from_stack([ACCOUNT, *resources])
    finding = RULES_BY_ID[rule].evaluate(model, Thresholds())
    return finding.outcome, finding.message


def lock(kind: str, **props: Any) -> StackResource:
    return StackResource(kind, "lock", {"lockName": "keep", "level": "CanNotDelete", **props})


@pytest.mark.parametrize(
    ("resource", "outcome", "says"),
    [
        (lock(pulumi_nets.LOCK_BY_SCOPE, scope=ACCOUNT_ID.upper()), Outcome.PASS, "the account"),
        (
            lock(
                pulumi_nets.LOCK_AT_RESOURCE,
                resourceProviderNamespace="Microsoft.Storage",
                resourceType="storageAccounts",
                resourceName="docs",
                resourceGroupName="rg-app",
            ),
            Outcome.PASS,
            "the account",
        ),
        (
            lock(pulumi_nets.LOCK_AT_GROUP, resourceGroupName="RG-APP"),
            Outcome.PASS,
            "the resource group",
        ),
        (lock(pulumi_nets.LOCK_AT_SUBSCRIPTION), Outcome.PASS, "the subscription"),
        (
            lock(pulumi_nets.LOCK_BY_SCOPE, scope=ACCOUNT_ID, level="NotSpecified"),
            Outcome.FAIL,
            "NotSpecified",
        ),
        (lock(pulumi_nets.LOCK_AT_GROUP, resourceGroupName="rg-other"), Outcome.UNKNOWN, "outside"),
        (lock(pulumi_nets.LOCK_BY_SCOPE, scope=UNKNOWN_STRING), Outcome.UNKNOWN, "not known yet"),
        (
            lock(pulumi_nets.LOCK_BY_SCOPE, scope=ACCOUNT_ID, level=UNKNOWN_STRING),
            Outcome.UNKNOWN,
            "level",
        ),
    ],
)
def test_a_stack_lock_is_judged_by_where_it_sits(
    resource: StackResource, outcome: Outcome, says: str
) -> None:
    """A lock on the account, its group or the subscription passes, named by its scope; one on
    another group leaves the rule UNKNOWN (a lock outside the stack may exist)."""
    judged, message = judge("SN-DELETE-LOCK", resource)
    assert judged is outcome, message
    assert says in message


def setting(kind: str = pulumi_nets.DIAGNOSTIC_SETTINGS[0], **props: Any) -> StackResource:
    values = {
        "resourceUri": f"{ACCOUNT_ID}/blobServices/default",
        "workspaceId": "/subscriptions/s/resourceGroups/l/providers/Microsoft.OperationalInsights/workspaces/w",
        "logs": LOGS,
        **props,
    }
    return StackResource(kind, "blob-logs", values)


@pytest.mark.parametrize(
    ("resources", "outcome"),
    [
        ((setting(),), Outcome.PASS),
        ((setting(pulumi_nets.DIAGNOSTIC_SETTINGS[1]),), Outcome.PASS),
        ((setting(logs=[{"categoryGroup": "allLogs", "enabled": True}]),), Outcome.PASS),
        ((setting(logs=LOGS[1:]),), Outcome.FAIL),
        ((setting(workspaceId=None),), Outcome.FAIL),
        ((), Outcome.UNKNOWN),
        ((setting(resourceUri=ACCOUNT_ID),), Outcome.UNKNOWN),
        ((setting(resourceUri=UNKNOWN_STRING),), Outcome.UNKNOWN),
    ],
)
def test_a_stack_diagnostic_setting_is_judged_on_the_blob_service(
    resources: tuple[StackResource, ...], outcome: Outcome
) -> None:
    """Only a setting on the account's blob service counts (the account's own does not); its
    categories and destination decide; none in the stack is UNKNOWN."""
    assert judge("SN-BLOB-LOGGING", *resources)[0] is outcome


def instance(resource_id: str, state: str | None = None) -> StackResource:
    inner: dict[str, Any] = {
        "dataSourceInfo": {
            "resourceID": resource_id,
            "datasourceType": "Microsoft.Storage/storageAccounts/blobServices",
        }
    }
    if state is not None:
        inner["currentProtectionState"] = state
    return StackResource(
        pulumi_nets.BACKUP_INSTANCE, "blobs", {"backupInstanceName": "blobs", "properties": inner}
    )


@pytest.mark.parametrize(
    ("resources", "outcome"),
    [
        ((instance(ACCOUNT_ID.lower()),), Outcome.PASS),
        ((instance(ACCOUNT_ID, "ProtectionStopped"),), Outcome.FAIL),
        ((instance(ACCOUNT_ID.replace("docs", "other")),), Outcome.UNKNOWN),
        ((instance(UNKNOWN_STRING),), Outcome.UNKNOWN),
        ((), Outcome.UNKNOWN),
    ],
)
def test_a_stack_backup_instance_is_judged_by_its_data_source(
    resources: tuple[StackResource, ...], outcome: Outcome
) -> None:
    """An instance whose data source is the account passes (failing once stopped); another
    account's, or none, leaves the rule UNKNOWN."""
    assert judge("SN-BACKUP-PROTECTED", *resources)[0] is outcome
