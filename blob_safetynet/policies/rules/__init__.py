"""The rule registry: every rule, in catalogue order."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Final

from blob_safetynet.policies.rules.access import (
    NEVER_GRANTED_ACTIONS,
    NO_BROAD_APP_ROLES,
    TAG_WRITE_ROLE,
)
from blob_safetynet.policies.rules.account import (
    ACCOUNT_KIND,
    FLAT_NAMESPACE,
    HTTPS_TLS,
    NO_PUBLIC_ACCESS,
    SHARED_KEY_OFF,
)
from blob_safetynet.policies.rules.base import (
    Finding,
    FixTarget,
    Outcome,
    Remediation,
    Rule,
    RuleScope,
    Severity,
    Verdict,
)
from blob_safetynet.policies.rules.containers import CONTAINERS_PRIVATE
from blob_safetynet.policies.rules.credentials import (
    KEY_EXPIRATION_POLICY,
    NO_LOCAL_USERS,
    SAS_EXPIRATION_POLICY,
)
from blob_safetynet.policies.rules.data_protection import (
    BLOB_SOFT_DELETE,
    CONTAINER_SOFT_DELETE,
    NO_PERMANENT_DELETE,
    VERSION_EXPIRY,
)
from blob_safetynet.policies.rules.encryption import CMK_ENCRYPTION, INFRA_ENCRYPTION
from blob_safetynet.policies.rules.lifecycle import PENDING_LIFECYCLE
from blob_safetynet.policies.rules.model import Account, Thresholds
from blob_safetynet.policies.rules.nets import BACKUP_PROTECTED, BLOB_LOGGING, DELETE_LOCK
from blob_safetynet.policies.rules.network import (
    NETWORK_DEFAULT_DENY,
    PRIVATE_ENDPOINT,
    PUBLIC_NETWORK_ACCESS,
    TRUSTED_SERVICES,
)
from blob_safetynet.policies.rules.resilience import (
    BLOB_VERSIONING,
    GEO_REDUNDANCY,
    POINT_IN_TIME,
    PROTOCOL_CONTAINER_MUTABLE,
)
from blob_safetynet.policies.rules.threats import CROSS_TENANT_REPLICATION, DEFENDER_FOR_STORAGE

RULES: Final[tuple[Rule, ...]] = (
    BLOB_SOFT_DELETE,
    CONTAINER_SOFT_DELETE,
    NO_PERMANENT_DELETE,
    PENDING_LIFECYCLE,
    FLAT_NAMESPACE,
    ACCOUNT_KIND,
    SHARED_KEY_OFF,
    NO_PUBLIC_ACCESS,
    CONTAINERS_PRIVATE,
    HTTPS_TLS,
    TAG_WRITE_ROLE,
    NO_BROAD_APP_ROLES,
    NEVER_GRANTED_ACTIONS,
    VERSION_EXPIRY,
    PUBLIC_NETWORK_ACCESS,
    NETWORK_DEFAULT_DENY,
    TRUSTED_SERVICES,
    PRIVATE_ENDPOINT,
    CROSS_TENANT_REPLICATION,
    INFRA_ENCRYPTION,
    CMK_ENCRYPTION,
    KEY_EXPIRATION_POLICY,
    SAS_EXPIRATION_POLICY,
    NO_LOCAL_USERS,
    DEFENDER_FOR_STORAGE,
    GEO_REDUNDANCY,
    POINT_IN_TIME,
    BLOB_VERSIONING,
    PROTOCOL_CONTAINER_MUTABLE,
    DELETE_LOCK,
    BLOB_LOGGING,
    BACKUP_PROTECTED,
)

RULES_BY_ID: Final[dict[str, Rule]] = {rule.id: rule for rule in RULES}


def ruleset_version(rules: tuple[Rule, ...] = RULES, thresholds: Thresholds | None = None) -> str:
    """The rule set's fingerprint: 12 hex digits of a SHA-256 over each rule's id, severity,
    scope and blocking, and the default thresholds. Prose (rationale, remediation) is left out:
    a reworded text judges nothing differently."""
    judged = [
        (rule.id, rule.severity.value, rule.scope.value, rule.advisory, rule.blob_only)
        for rule in rules
    ]
    text = json.dumps([judged, asdict(thresholds or Thresholds())], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def evaluate(
    account: Account,
    thresholds: Thresholds,
    *,
    rules: tuple[Rule, ...] = RULES,
    every_rule: bool = False,
) -> list[Finding]:
    """Judge one account by every rule that applies to it (all of them with `every_rule`)."""
    return [
        rule.evaluate(account, thresholds)
        for rule in rules
        if every_rule or rule.applies_to(account, thresholds)
    ]


__all__ = [
    "RULES",
    "RULES_BY_ID",
    "Finding",
    "FixTarget",
    "Outcome",
    "Remediation",
    "Rule",
    "RuleScope",
    "Severity",
    "Verdict",
    "evaluate",
    "ruleset_version",
]
