"""Which accounts each rule judges, what it says when that cannot be told, and every
threshold on both sides of its boundary."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from blob_safetynet.policies.rules import RULES, RULES_BY_ID, Outcome, Rule, RuleScope, evaluate
from blob_safetynet.policies.rules.base import Framework
from blob_safetynet.policies.rules.model import UNKNOWN, Account, Container, Facet, Thresholds
from tests.policies import models as m

THRESHOLDS = Thresholds()
REASON = "containers not read (permission: blobContainers/list)"


def test_every_rule_has_a_scope() -> None:
    """Each rule is baseline or protocol; the soft delete rules are baseline (CIS 4.10)."""
    assert {rule.scope for rule in RULES} == set(RuleScope)
    for rule_id in ("SN-BLOB-SOFT-DELETE", "SN-CONTAINER-SOFT-DELETE", "SN-NO-PERMANENT-DELETE"):
        assert RULES_BY_ID[rule_id].scope is RuleScope.BASELINE


def test_unreadable_containers_make_protocol_rules_unknown_with_the_reason() -> None:
    """A container list that could not be read leaves every protocol rule UNKNOWN, naming the
    read that failed, even when its own facts would fail."""
    locked = m.account(
        settings=m.settings(kind="Storage"),
        containers=UNKNOWN,
        lifecycle_rules=(),
        unknown_reasons={Facet.CONTAINERS: REASON},
    )
    judged = {f.rule.id: f for f in evaluate(locked, THRESHOLDS)}
    protocol = [rule.id for rule in RULES if rule.protocol]
    assert {judged[rule_id].outcome for rule_id in protocol} == {Outcome.UNKNOWN}
    assert REASON in judged["SN-ACCOUNT-KIND"].message


def test_an_account_configured_for_the_container_is_a_protocol_account() -> None:
    """A lifecycle rule naming the protocol container makes protocol rules judge an account
    whose container list no longer shows it."""
    configured = m.account(containers=(Container("other", None),))
    assert "SN-PENDING-LIFECYCLE" in {f.rule.id for f in evaluate(configured, THRESHOLDS)}


def test_baseline_rules_judge_an_account_without_the_container() -> None:
    """An account without the protocol container gets soft delete verdicts, no protocol ones."""
    helper = m.account(
        containers=(Container("logs", None),),
        lifecycle_rules=(),
        blob_service_properties=m.blob_service_properties(delete={"enabled": False}),
    )
    judged = {f.rule.id: f.outcome for f in evaluate(helper, THRESHOLDS)}
    assert judged["SN-BLOB-SOFT-DELETE"] is Outcome.FAIL
    assert not {rule.id for rule in RULES if rule.protocol} & set(judged)


def test_file_storage_blob_rules_are_not_applicable() -> None:
    """On a FileStorage account every blob rule is NOT_APPLICABLE and the rest are judged."""
    files = m.account(
        settings=m.settings(kind="FileStorage", allow_blob_public_access=True),
        blob_service_properties=UNKNOWN,
        containers=UNKNOWN,
        lifecycle_rules=UNKNOWN,
        local_users=UNKNOWN,
        role_assignments=(),
    )
    judged = {f.rule.id: f for f in evaluate(files, THRESHOLDS)}
    blob_rules = {rule.id for rule in RULES if rule.needs_blob}
    assert {judged[r].outcome for r in blob_rules} == {Outcome.NOT_APPLICABLE}
    assert {f.outcome for r, f in judged.items() if r not in blob_rules} == {Outcome.PASS}
    assert "has no blob service" in judged["SN-ACCOUNT-KIND"].message


def _settings(**changes: Any) -> Account:
    return m.account(settings=m.settings(**changes))


BOUNDARIES = [
    # (rule, thresholds, account at the boundary, account one step past it)
    (
        "SN-BLOB-SOFT-DELETE",
        Thresholds(min_blob_soft_delete_days=7),
        m.account(blob_service_properties=m.blob_service_properties(delete={"days": 7})),
        m.account(blob_service_properties=m.blob_service_properties(delete={"days": 6})),
    ),
    (
        "SN-CONTAINER-SOFT-DELETE",
        Thresholds(min_container_soft_delete_days=20),
        m.account(blob_service_properties=m.blob_service_properties(containers={"days": 20})),
        m.account(blob_service_properties=m.blob_service_properties(containers={"days": 19})),
    ),
    (
        "SN-POINT-IN-TIME-RESTORE",
        THRESHOLDS,
        m.account(blob_service_properties=m.blob_service_properties(restore={"days": 13})),
        m.account(blob_service_properties=m.blob_service_properties(restore={"days": 14})),
    ),
    (
        "SN-PENDING-LIFECYCLE",
        Thresholds(max_pending_days=7),
        m.account(lifecycle_rules=(m.pending_rule(delete_after_days=7),)),
        m.account(lifecycle_rules=(m.pending_rule(delete_after_days=8),)),
    ),
    (
        "SN-HTTPS-TLS",
        THRESHOLDS,
        _settings(minimum_tls_version="TLS1_2"),
        _settings(minimum_tls_version="TLS1_1"),
    ),
    (
        "SN-SAS-EXPIRATION-POLICY",
        Thresholds(max_sas_expiration_seconds=3600),
        _settings(sas_expiration_seconds=3600),
        _settings(sas_expiration_seconds=3601),
    ),
    (
        "SN-KEY-EXPIRATION-POLICY",
        Thresholds(max_key_expiration_days=90),
        _settings(key_expiration_days=90),
        _settings(key_expiration_days=91),
    ),
]


@pytest.mark.parametrize(
    ("rule_id", "limits", "at", "past"), BOUNDARIES, ids=[b[0] for b in BOUNDARIES]
)
def test_threshold_boundary(rule_id: str, limits: Thresholds, at: Account, past: Account) -> None:
    """The limit itself passes; one step beyond it fails."""
    rule = RULES_BY_ID[rule_id]
    assert rule.evaluate(at, limits).outcome is Outcome.PASS
    assert rule.evaluate(past, limits).outcome is Outcome.FAIL


def test_thresholds_are_read_not_hard_coded() -> None:
    """Moving a limit moves the boundary: a stricter SAS limit fails the one-hour policy."""
    strict = dataclasses.replace(THRESHOLDS, max_sas_expiration_seconds=1800)
    rule = RULES_BY_ID["SN-SAS-EXPIRATION-POLICY"]
    assert rule.evaluate(m.account(), strict).outcome is Outcome.FAIL


CONTROL_ID = {
    Framework.CIS_AZURE_3_0: re.compile(r"\d+(\.\d+)+"),
    Framework.CIS_AZURE_4_0: re.compile(r"\d+(\.\d+)+"),
    Framework.MCSB_V1: re.compile(r"(NS|IM|PA|DP|AM|LT|IR|PV|ES|BR|DS|GS)-\d+"),
}


@pytest.mark.parametrize("rule", RULES, ids=[rule.id for rule in RULES])
def test_rule_metadata_is_structured(rule: Rule) -> None:
    """Every rule cites a Microsoft page, and each control id has its framework's shape and
    appears once."""
    assert rule.references
    assert all(ref.startswith("https://learn.microsoft.com/") for ref in rule.references)
    assert all(CONTROL_ID[c.framework].fullmatch(c.id) for c in rule.controls)
    assert len(set(rule.controls)) == len(rule.controls)
    assert not rule.title.startswith("Ensure")
