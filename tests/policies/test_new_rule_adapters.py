"""The peer rules through both adapters: ARM bodies (the audit) and azure-native inputs (the
pack), each with a PASS, a FAIL and an UNKNOWN document."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from blob_safetynet.policies.adapters import arm, pulumi_props
from blob_safetynet.policies.adapters.pulumi_props import StackResource
from blob_safetynet.policies.rules import RULES_BY_ID, Outcome
from blob_safetynet.policies.rules.model import UNKNOWN, Encryption, Network, Thresholds
from testkit.arm_fake import FakeAccount, compliant_account, local_user

STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
BOOL = "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7"
NUMBER = "3eeb2bf0-c639-47a8-9e75-3b44932eb421"
ARRAY = "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2"
"""Pulumi's unknown sentinels (a value not known during preview)."""

Change = Callable[[dict[str, Any]], None]


def props(**values: Any) -> Change:
    def change(document: dict[str, Any]) -> None:
        document["account"].update(values)

    return change


def nested(key: str, **values: Any) -> Change:
    """Set keys inside one object: the firewall ("acls") or an account property."""

    def change(document: dict[str, Any]) -> None:
        holder = document if key in document else document["account"]
        holder[key] = {**(holder.get(key) or {}), **values}

    return change


def both(*changes: Change) -> Change:
    def change(document: dict[str, Any]) -> None:
        for one in changes:
            one(document)

    return change


def part(key: str, value: Any) -> Change:
    def change(document: dict[str, Any]) -> None:
        document[key] = value

    return change


# rule -> outcome -> (ARM change, Pulumi change); both adapters see the same compliant start.
CASES: dict[str, dict[Outcome, tuple[Change, Change]]] = {
    "SN-PUBLIC-NETWORK-ACCESS": {
        Outcome.PASS: (
            props(publicNetworkAccess="Disabled"),
            props(publicNetworkAccess="Disabled"),
        ),
        Outcome.FAIL: (props(publicNetworkAccess=None), props(publicNetworkAccess="Enabled")),
        Outcome.UNKNOWN: (props(publicNetworkAccess=7), props(publicNetworkAccess=STRING)),
    },
    "SN-NETWORK-DEFAULT-DENY": {
        Outcome.PASS: (nested("acls", defaultAction="Deny"), nested("acls", defaultAction="Deny")),
        Outcome.FAIL: (part("acls", None), nested("acls", defaultAction="Allow")),
        Outcome.UNKNOWN: (part("acls", "x"), nested("acls", defaultAction=STRING)),
    },
    "SN-TRUSTED-SERVICES": {
        Outcome.PASS: (nested("acls", bypass="Logging, AzureServices"), part("acls", None)),
        Outcome.FAIL: (nested("acls", bypass="None"), nested("acls", bypass="Metrics")),
        Outcome.UNKNOWN: (nested("acls", bypass=["AzureServices"]), nested("acls", bypass=STRING)),
    },
    "SN-PRIVATE-ENDPOINT": {
        Outcome.PASS: (part("endpoints", "Approved"), part("endpoints", "automatic")),
        Outcome.FAIL: (part("endpoints", "Rejected"), part("endpoints", "manual")),
        Outcome.UNKNOWN: (part("endpoints", None), part("endpoints", "unknown target")),
    },
    "SN-CROSS-TENANT-REPLICATION": {
        Outcome.PASS: (
            props(allowCrossTenantReplication=False),
            props(allowCrossTenantReplication=False),
        ),
        Outcome.FAIL: (
            props(allowCrossTenantReplication=None),
            props(allowCrossTenantReplication=True),
        ),
        Outcome.UNKNOWN: (
            props(allowCrossTenantReplication="maybe"),
            props(allowCrossTenantReplication=BOOL),
        ),
    },
    "SN-INFRA-ENCRYPTION": {
        Outcome.PASS: (
            nested("encryption", requireInfrastructureEncryption=True),
            nested("encryption", requireInfrastructureEncryption=True),
        ),
        Outcome.FAIL: (
            props(encryption=None),
            nested("encryption", requireInfrastructureEncryption=False),
        ),
        Outcome.UNKNOWN: (
            props(encryption="x"),
            nested("encryption", requireInfrastructureEncryption=BOOL),
        ),
    },
    "SN-CMK-ENCRYPTION": {
        Outcome.PASS: (
            nested("encryption", keySource="Microsoft.Keyvault"),
            nested("encryption", keySource="Microsoft.Keyvault"),
        ),
        Outcome.FAIL: (props(encryption=None), nested("encryption", keySource="Microsoft.Storage")),
        Outcome.UNKNOWN: (
            nested("encryption", keySource=3),
            nested("encryption", keySource=STRING),
        ),
    },
    "SN-KEY-EXPIRATION-POLICY": {
        Outcome.PASS: (
            props(keyPolicy={"keyExpirationPeriodInDays": 90}),
            props(keyPolicy={"keyExpirationPeriodInDays": 30}),
        ),
        Outcome.FAIL: (props(keyPolicy=None), props(keyPolicy={"keyExpirationPeriodInDays": 91})),
        Outcome.UNKNOWN: (
            props(keyPolicy={"keyExpirationPeriodInDays": "90"}),
            props(keyPolicy={"keyExpirationPeriodInDays": NUMBER}),
        ),
    },
    "SN-SAS-EXPIRATION-POLICY": {
        Outcome.PASS: (
            props(sasPolicy={"sasExpirationPeriod": "0.01:00:00", "expirationAction": "Log"}),
            props(sasPolicy={"sasExpirationPeriod": "00:30:00", "expirationAction": "Block"}),
        ),
        Outcome.FAIL: (
            props(sasPolicy=None),
            props(sasPolicy={"sasExpirationPeriod": "1.00:00:00", "expirationAction": "Log"}),
        ),
        Outcome.UNKNOWN: (
            props(sasPolicy={"sasExpirationPeriod": "one hour"}),
            props(sasPolicy={"sasExpirationPeriod": STRING}),
        ),
    },
    "SN-NO-LOCAL-USERS": {
        Outcome.PASS: (props(isLocalUserEnabled=None), props(isLocalUserEnabled=False)),
        Outcome.FAIL: (
            both(part("users", ["sftpuser"]), props(isLocalUserEnabled=True)),
            props(isSftpEnabled=True),
        ),
        Outcome.UNKNOWN: (
            both(part("users", None), props(isLocalUserEnabled=True)),
            props(isSftpEnabled=BOOL),
        ),
    },
    "SN-DEFENDER-FOR-STORAGE": {
        Outcome.PASS: (part("defender", True), part("defender", True)),
        Outcome.FAIL: (part("defender", False), part("defender", False)),
        Outcome.UNKNOWN: (part("defender", "unread"), part("defender", None)),
    },
}


def start() -> tuple[FakeAccount, dict[str, Any]]:
    fake = compliant_account("docs")
    body = copy.deepcopy(fake.body)
    document = {
        "account": body["properties"],
        "acls": body["properties"].pop("networkAcls"),
        "endpoints": "Approved",
        "users": [],
        "defender": True,
    }
    return fake, document


def via_arm(rule_id: str, change: Change) -> Outcome:
    fake, document = start()
    change(document)
    body = {**fake.body, "properties": dict(document["account"])}
    if document["acls"] is not None:
        body["properties"]["networkAcls"] = document["acls"]
    endpoints = document["endpoints"]
    reads = arm.ArmReads(
        account=body,
        blob_service_properties=fake.blob_service_properties,
        containers=fake.containers,
        management_policy=fake.management_policy,
        role_assignments=[],
        local_users=(
            None
            if document["users"] is None
            else [local_user(fake.id, n) for n in document["users"]]
        ),
        private_endpoint_connections=(
            None
            if endpoints is None
            else [{"properties": {"privateLinkServiceConnectionState": {"status": endpoints}}}]
        ),
        defender_settings={"properties": {"isEnabled": document["defender"] is True}},
    )
    reads = _unread(reads, document)
    return _judge(rule_id, arm.account(reads))


def _unread(reads: arm.ArmReads, document: dict[str, Any]) -> arm.ArmReads:
    """Parts a test leaves unread (None above) become UNKNOWN, as a failed read leaves them."""
    if document["users"] is None:
        reads.local_users = UNKNOWN
    if document["endpoints"] is None:
        reads.private_endpoint_connections = UNKNOWN
    if document["defender"] == "unread":
        reads.defender_settings = UNKNOWN
    return reads


def via_pulumi(rule_id: str, change: Change) -> Outcome:
    fake, document = start()
    change(document)
    account_props = dict(document["account"])
    account_props["enableHttpsTrafficOnly"] = account_props.pop("supportsHttpsTrafficOnly")
    if document["acls"] is not None:
        account_props["networkRuleSet"] = document["acls"]
    account_props.update(kind=fake.body["kind"], accountName="docs")
    account_id = fake.id
    resources = [
        StackResource(pulumi_props.STORAGE_ACCOUNT, "docs", account_props, id=account_id),
        StackResource(
            pulumi_props.BLOB_CONTAINER,
            "documents",
            {"accountName": "docs", "containerName": "documents"},
        ),
    ]
    link = {"documents": None}
    if document["endpoints"] in ("Approved", "automatic"):
        link = {"privateLinkServiceConnections": [{"privateLinkServiceId": account_id}]}
    elif document["endpoints"] == "manual":
        link = {"manualPrivateLinkServiceConnections": [{"privateLinkServiceId": account_id}]}
    elif document["endpoints"] == "unknown target":
        link = {"privateLinkServiceConnections": [{"privateLinkServiceId": STRING}]}
    resources.append(StackResource(pulumi_props.PRIVATE_ENDPOINT, "pe", link))
    if document["defender"] is not None:
        resources.append(
            StackResource(
                pulumi_props.DEFENDER_FOR_STORAGE,
                "defender",
                {"resourceId": account_id, "properties": {"isEnabled": document["defender"]}},
            )
        )
    (model,) = pulumi_props.accounts_from_stack(resources)
    return _judge(rule_id, model)


def _judge(rule_id: str, model: Any) -> Outcome:
    return RULES_BY_ID[rule_id].evaluate(model, Thresholds()).outcome


PARAMS = [
    pytest.param(rule_id, outcome, adapter, id=f"{rule_id}-{outcome.value.lower()}-{adapter}")
    for rule_id, by_outcome in CASES.items()
    for outcome in by_outcome
    for adapter in ("arm", "pulumi")
]


@pytest.mark.parametrize(("rule_id", "outcome", "adapter"), PARAMS)
def test_rule_outcome_through_adapter(rule_id: str, outcome: Outcome, adapter: str) -> None:
    """The adapter's document for this outcome is judged with exactly that outcome."""
    arm_change, pulumi_change = CASES[rule_id][outcome]
    judged = (
        via_arm(rule_id, arm_change) if adapter == "arm" else via_pulumi(rule_id, pulumi_change)
    )
    assert judged is outcome


def test_every_peer_rule_has_all_three_outcomes_in_both_adapters() -> None:
    """The table covers each peer rule with PASS, FAIL and UNKNOWN documents."""
    assert all(
        set(by_outcome) == {Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN}
        for by_outcome in CASES.values()
    )
    assert len(CASES) == 11


@pytest.mark.parametrize(
    ("tier", "account_setting", "outcome"),
    [
        ("Standard", None, Outcome.PASS),
        ("Free", None, Outcome.FAIL),
        ("Standard", False, Outcome.FAIL),
        ("Free", True, Outcome.PASS),
        (STRING, None, Outcome.UNKNOWN),
    ],
)
def test_a_stack_pricing_decides_defender_unless_the_account_has_a_setting(
    tier: str, account_setting: bool | None, outcome: Outcome
) -> None:
    """A StorageAccounts Pricing in the stack covers its accounts; an account's own
    DefenderForStorage setting wins over it."""
    fake, document = start()
    props = dict(document["account"], kind="StorageV2", accountName="docs")
    resources = [
        StackResource(pulumi_props.STORAGE_ACCOUNT, "docs", props, id=fake.id),
        StackResource(
            pulumi_props.PRICING, "plan", {"pricingName": "StorageAccounts", "pricingTier": tier}
        ),
    ]
    if account_setting is not None:
        setting = {"resourceId": fake.id, "properties": {"isEnabled": account_setting}}
        resources.append(StackResource(pulumi_props.DEFENDER_FOR_STORAGE, "d", setting))
    (model,) = pulumi_props.accounts_from_stack(resources)
    assert _judge("SN-DEFENDER-FOR-STORAGE", model) is outcome


def test_absent_properties_take_the_documented_open_defaults_in_both_adapters() -> None:
    """An account body without any of the new properties reads as open in both adapters:
    public network Enabled, firewall Allow with AzureServices, platform keys without the
    infrastructure layer, cross-tenant replication allowed, no key or SAS policy, SFTP off,
    local users unset."""
    minimal = {"kind": "StorageV2"}
    from_arm = arm.settings({"name": "docs", "kind": "StorageV2", "properties": {}})
    from_pulumi = pulumi_props.settings(minimal)
    for found in (from_arm, from_pulumi):
        assert found.network == Network("Enabled", "Allow", ("AzureServices",))
        assert found.encryption == Encryption(infrastructure=False, key_source="Microsoft.Storage")
        assert found.allow_cross_tenant_replication is True
        assert (found.key_expiration_days, found.sas_expiration_seconds) == (None, None)
        assert (found.sftp_enabled, found.local_users_enabled) == (False, None)


@pytest.mark.parametrize(
    ("period", "seconds"),
    [("00:00:01", 1), ("0.01:00:00", 3600), ("1.00:00:00", 86400), ("365.23:59:59", 31622399)],
)
def test_sas_expiration_periods_are_read_as_seconds(period: str, seconds: int) -> None:
    """sasExpirationPeriod's D.HH:MM:SS (day part optional) becomes seconds."""
    found = pulumi_props.settings({"sasPolicy": {"sasExpirationPeriod": period}})
    assert found.sas_expiration_seconds == seconds
