"""SN-GEO-REDUNDANCY, SN-POINT-IN-TIME-RESTORE, SN-BLOB-VERSIONING,
SN-PROTOCOL-CONTAINER-MUTABLE and the container soft delete floor on every path a rule is judged on: a live account through the fake
ARM, the saved files (the CLI's outputs and a template export), the Pulumi program's resources,
the fleet (Resource Graph rows, then the per-account reads), and the audit's option."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.policies.adapters import pulumi_props
from blob_safetynet.policies.adapters.pulumi_props import StackResource
from blob_safetynet.policies.rules import RULES_BY_ID, Finding, Outcome
from blob_safetynet.policies.rules.model import Thresholds
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.files import run_offline_audit
from blob_safetynet.policies.sources.fleet import run_fleet_audit
from blob_safetynet.policies.sources.results import Scope
from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER
from testkit.arm_fake import TOKEN, FakeAccount, FakeArm, compliant_account, mixed_fleet, set_path
from tests.conftest import RunCli
from tests.policies.arm_env import use_fake_arm
from tests.policies.test_offline_audit import cli_files, live_findings, template_export

GEO, RESTORE, VERSIONING, MUTABLE, CONTAINER_DAYS = (
    "SN-GEO-REDUNDANCY",
    "SN-POINT-IN-TIME-RESTORE",
    "SN-BLOB-VERSIONING",
    "SN-PROTOCOL-CONTAINER-MUTABLE",
    "SN-CONTAINER-SOFT-DELETE",
)
NEW = (GEO, RESTORE, VERSIONING, MUTABLE, CONTAINER_DAYS)
STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
BOOL = "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7"
"""Pulumi's unknown sentinels (a value not known during preview)."""

Change = Callable[[FakeAccount], None]


def _container(account: FakeAccount) -> dict[str, Any]:
    (found,) = [c for c in account.containers if c["name"] == DEFAULT_CONTAINER]
    props: dict[str, Any] = found["properties"]
    return props


def broken(account: FakeAccount) -> None:
    """Each rule's insecure value: locally redundant, no restore, no versioning, a legal
    hold, 3 days."""
    account.body["sku"] = {"name": "Standard_LRS", "tier": "Standard"}
    set_path(account.blob_service_properties, "properties.restorePolicy.enabled", False)
    set_path(account.blob_service_properties, "properties.isVersioningEnabled", False)
    _container(account)["hasLegalHold"] = True
    set_path(account.blob_service_properties, "properties.containerDeleteRetentionPolicy.days", 3)


def unreadable(account: FakeAccount) -> None:
    """Each rule's fact unreadable: no SKU, an odd restore policy, a versioning switch that is
    no boolean, a container without its read-only immutability flags, retention days of the
    wrong type."""
    account.body.pop("sku")
    set_path(account.blob_service_properties, "properties.restorePolicy", "on")
    set_path(account.blob_service_properties, "properties.isVersioningEnabled", "yes")
    _container(account).pop("hasLegalHold")
    _container(account).pop("hasImmutabilityPolicy")
    set_path(account.blob_service_properties, "properties.containerDeleteRetentionPolicy.days", "7")


STATES: dict[str, tuple[Change, Outcome]] = {
    "compliant": (lambda _: None, Outcome.PASS),
    "broken": (broken, Outcome.FAIL),
    "unreadable": (unreadable, Outcome.UNKNOWN),
}


def account_in(state: str) -> FakeAccount:
    account = compliant_account("acctres", "rg-docs")
    account.body["properties"]["privateEndpointConnections"] = account.private_endpoint_connections
    STATES[state][0](account)
    return account


def outcomes(findings: list[Finding]) -> dict[str, Outcome]:
    return {f.rule.id: f.outcome for f in findings if f.rule.id in NEW}


@pytest.fixture
def fake() -> Iterator[FakeArm]:
    with FakeArm() as server:
        yield server


@pytest.mark.parametrize("state", list(STATES))
def test_a_live_account_is_judged_by_each_rule(fake: FakeArm, state: str) -> None:
    """Read through ARM, each new rule passes the compliant account, fails the broken one and
    cannot judge the unreadable one."""
    expected = STATES[state][1]
    assert outcomes(live_findings(fake, account_in(state))) == dict.fromkeys(NEW, expected)


@pytest.mark.parametrize("state", list(STATES))
def test_the_cli_outputs_give_the_live_verdicts(fake: FakeArm, tmp_path: Path, state: str) -> None:
    """The four `az` outputs judge as the live read does, but the read-only immutability
    flags: left out of `container-rm list`'s output, the file does not hold them."""
    account = account_in(state)
    live = outcomes(live_findings(fake, account))
    report = run_offline_audit(cli_files(account, tmp_path), Thresholds(), "2026-09-01")
    offline = outcomes(report.findings)
    if state == "unreadable":
        assert offline.pop(MUTABLE) is Outcome.NOT_IN_FILES
        live.pop(MUTABLE)
    assert offline == live


def _real_export(account: FakeAccount, path: Path) -> Path:
    """A template export as ARM writes it: a container's read-only flags are not in it."""
    exported = copy.deepcopy(account)
    for container in exported.containers:
        container["properties"].pop("hasLegalHold", None)
        container["properties"].pop("hasImmutabilityPolicy", None)
    return template_export(exported, path)


def test_a_template_export_cannot_hold_a_legal_hold(tmp_path: Path) -> None:
    """A template export judges the SKU and the restore policy, and leaves the protocol
    container's immutability NOT_IN_FILES (a legal hold is no template property)."""
    path = _real_export(account_in("compliant"), tmp_path / "export.json")
    found = outcomes(run_offline_audit([path], Thresholds()).findings)
    assert found == {
        GEO: Outcome.PASS,
        RESTORE: Outcome.PASS,
        VERSIONING: Outcome.PASS,
        CONTAINER_DAYS: Outcome.PASS,
        MUTABLE: Outcome.NOT_IN_FILES,
    }
    finding = next(
        f for f in run_offline_audit([path], Thresholds()).findings if f.rule.id == MUTABLE
    )
    assert "hasLegalHold" in finding.message


def test_a_template_export_with_version_immutability_fails(tmp_path: Path) -> None:
    """Version-level immutability a template declares on the protocol's container fails the
    rule, whatever the file cannot hold."""
    account = account_in("compliant")
    _container(account)["immutableStorageWithVersioning"] = {"enabled": True}
    path = _real_export(account, tmp_path / "export.json")
    found = outcomes(run_offline_audit([path], Thresholds()).findings)
    assert found[MUTABLE] is Outcome.FAIL


def test_an_account_level_default_policy_fails_the_protocol_container(
    fake: FakeArm, tmp_path: Path
) -> None:
    """An account-level version immutability default policy in force makes every container
    WORM; a Disabled one does not."""
    account = account_in("compliant")
    account.body["properties"]["immutableStorageWithVersioning"] = {
        "enabled": True,
        "immutabilityPolicy": {"immutabilityPeriodSinceCreationInDays": 7, "state": "unlocked"},
    }
    assert outcomes(live_findings(fake, account))[MUTABLE] is Outcome.FAIL
    policy = account.body["properties"]["immutableStorageWithVersioning"]["immutabilityPolicy"]
    policy["state"] = "Disabled"
    report = run_offline_audit(cli_files(account, tmp_path), Thresholds(), "2026-09-01")
    assert outcomes(report.findings)[MUTABLE] is Outcome.PASS


# The program: azure-native inputs, judged by the pack's stack model.


def program(
    *,
    sku: object = "Standard_GZRS",
    restore: object = True,
    versioning: object = True,
    container_days: object = 14,
    policy_on: object = None,
) -> list[StackResource]:
    """A stack with one account, its blob service and the protocol's container; `policy_on`
    names the container a BlobContainerImmutabilityPolicy is declared on (None: no policy)."""
    resources = [
        StackResource(
            pulumi_props.STORAGE_ACCOUNT,
            "docs",
            {"accountName": "docs", "kind": "StorageV2", "sku": {"name": sku}},
        ),
        StackResource(
            pulumi_props.BLOB_SERVICE,
            "blob",
            {
                "accountName": "docs",
                "deleteRetentionPolicy": {"enabled": True, "days": 14},
                "containerDeleteRetentionPolicy": {"enabled": True, "days": container_days},
                "isVersioningEnabled": versioning,
                "changeFeed": {"enabled": True},
                "restorePolicy": {"enabled": restore, "days": 7},
            },
        ),
        StackResource(
            pulumi_props.BLOB_CONTAINER,
            "documents",
            {"accountName": "docs", "containerName": DEFAULT_CONTAINER},
        ),
    ]
    if policy_on is not None:
        resources.append(
            StackResource(
                pulumi_props.IMMUTABILITY_POLICY,
                "worm",
                {
                    "accountName": "docs",
                    "containerName": policy_on,
                    "immutabilityPeriodSinceCreationInDays": 7,
                },
            )
        )
    return resources


def judge_program(resources: list[StackResource]) -> dict[str, Outcome]:
    (model,) = pulumi_props.accounts_from_stack(resources)
    return {rule: RULES_BY_ID[rule].evaluate(model, Thresholds()).outcome for rule in NEW}


PROGRAMS: dict[str, tuple[dict[str, object], Outcome]] = {
    "compliant": ({}, Outcome.PASS),
    "broken": (
        {
            "sku": "Standard_ZRS",
            "restore": False,
            "versioning": False,
            "container_days": 3,
            "policy_on": DEFAULT_CONTAINER,
        },
        Outcome.FAIL,
    ),
    "preview": (
        {
            "sku": STRING,
            "restore": BOOL,
            "versioning": BOOL,
            "container_days": STRING,
            "policy_on": STRING,
        },
        Outcome.UNKNOWN,
    ),
}


@pytest.mark.parametrize("state", list(PROGRAMS))
def test_the_program_is_judged_by_each_rule(state: str) -> None:
    """The program's inputs pass, fail, or (values not known in preview) cannot be judged."""
    changes, expected = PROGRAMS[state]
    assert judge_program(program(**changes)) == dict.fromkeys(NEW, expected)  # type: ignore[arg-type]


def test_a_program_policy_on_another_container_leaves_the_protocol_container_mutable() -> None:
    """An immutability policy on a separate container (the remediation) passes the rule."""
    assert judge_program(program(policy_on="archive"))[MUTABLE] is Outcome.PASS


# The fleet: Resource Graph's rows carry the SKU, the per-account reads the rest.


def test_the_fleet_judges_each_rule_as_its_account_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over a mixed fleet, each new rule fails exactly the accounts set to fail it and is not
    applicable to the FileStorage ones; versioning off fails point-in-time restore too."""
    accounts = list(mixed_fleet(17, 2))
    for number, account in enumerate(accounts):
        if number % 5 == 4:
            set_path(account.blob_service_properties, "properties.isVersioningEnabled", False)
    with FakeArm(page_size=4) as server:
        for account in accounts:
            server.add(account)
        use_fake_arm(server, monkeypatch)
        report = run_fleet_audit(
            Scope("", subscriptions=tuple(server.subscriptions())),
            StaticTokenCredential(TOKEN),
            arm_endpoint=server.endpoint,
            connection_verify=server.ca_file,
        )
    assert not report.all_errors
    found = {(f.resource_id, f.rule.id): f.outcome for f in report.findings}
    for number, account in enumerate(accounts):
        fails = {
            GEO: number % 4 == 1,
            RESTORE: number % 6 == 2 or number % 5 == 4,
            VERSIONING: number % 5 == 4,
            MUTABLE: number % 8 == 3,
        }
        for rule, fail in fails.items():
            expected = Outcome.FAIL if fail else Outcome.PASS
            if number % 7 == 6:
                expected = Outcome.NOT_APPLICABLE
            assert found[(account.id, rule)] is expected, (account.name, rule)


# The audit's option and the pack's config.


@pytest.mark.parametrize(("days", "refused"), [("0", True), ("365", False), ("366", True)])
def test_the_audit_takes_the_container_days_azure_takes(
    run_cli: RunCli, tmp_path: Path, days: str, refused: bool
) -> None:
    """`--min-container-soft-delete-days` outside 1-365 is bad usage (exit 2)."""
    paths = [str(p) for p in cli_files(account_in("compliant"), tmp_path)]
    code, _, err = run_cli("audit", "--from-file", *paths, "--min-container-soft-delete-days", days)
    assert (code == 2) is refused, err
    if refused:
        assert "--min-container-soft-delete-days must be between 1 and 365" in err


def test_the_audits_container_floor_moves_the_verdict(run_cli: RunCli, tmp_path: Path) -> None:
    """Raised above the account's 14 days, the floor fails SN-CONTAINER-SOFT-DELETE, and the
    JSON report names the threshold it judged with."""
    paths = [str(p) for p in cli_files(account_in("compliant"), tmp_path)]
    out = tmp_path / "report.json"
    run_cli(
        "audit",
        "--from-file",
        *paths,
        "--min-container-soft-delete-days",
        "15",
        "--format",
        "json",
        "--output",
        str(out),
    )
    document = json.loads(out.read_text())
    assert document["thresholds"]["minContainerSoftDeleteDays"] == 15
    (finding,) = [f for f in document["findings"] if f["rule"] == CONTAINER_DAYS]
    assert finding["outcome"] == "FAIL"


def test_a_container_body_with_an_immutability_policy_but_no_flag_fails(fake: FakeArm) -> None:
    """A container GET's `immutabilityPolicy` with a retention period is a policy even where
    the `hasImmutabilityPolicy` flag is missing."""
    account = account_in("compliant")
    _container(account).pop("hasImmutabilityPolicy")
    _container(account)["immutabilityPolicy"] = {
        "properties": {"immutabilityPeriodSinceCreationInDays": 7, "state": "Unlocked"}
    }
    assert outcomes(live_findings(fake, account))[MUTABLE] is Outcome.FAIL


def test_a_policy_seen_by_its_outputs_is_placed_by_its_id() -> None:
    """A stack policy sees an immutability policy's outputs without `containerName`: its id
    names the container, so the protocol container still fails."""
    resources = program()
    account_id = (
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/docs"
    )
    resources.append(
        StackResource(
            pulumi_props.IMMUTABILITY_POLICY,
            "worm",
            {"immutabilityPeriodSinceCreationInDays": 7},
            id=f"{account_id}/blobServices/default/containers/{DEFAULT_CONTAINER}"
            "/immutabilityPolicies/default",
        )
    )
    assert judge_program(resources)[MUTABLE] is Outcome.FAIL
