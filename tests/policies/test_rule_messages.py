"""Every rule's message on every fixture, pinned: the report text users act on is reviewed
like code. A wording change shows up here as a diff of `data/rule_messages.json`; regenerate
it with `SAFETYNET_REGENERATE_MESSAGES=1 pytest tests/policies/test_rule_messages.py` and
review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

from blob_safetynet.policies.rules import RULES_BY_ID
from tests.policies.test_rules import CASES, THRESHOLDS

GOLDEN = Path(__file__).parent / "data" / "rule_messages.json"


def rendered() -> dict[str, str]:
    return {
        f"{rule_id} {outcome.value} {number}": RULES_BY_ID[rule_id]
        .evaluate(account, THRESHOLDS)
        .message
        for rule_id, cases in CASES.items()
        for outcome, accounts in cases.items()
        for number, account in enumerate(accounts)
    }


def test_rule_messages_match_the_reviewed_text() -> None:
    """Each rule's message on each fixture is exactly the reviewed one."""
    messages = rendered()
    if os.environ.get("SAFETYNET_REGENERATE_MESSAGES") == "1":
        GOLDEN.write_text(json.dumps(messages, indent=1, sort_keys=True) + "\n")
    assert messages == json.loads(GOLDEN.read_text())
