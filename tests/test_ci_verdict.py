"""The sentence a CI step's annotation and summary open with: what this run saw, read from its
own report, never the exit-code contract's list of everything a code may mean."""

from __future__ import annotations

from blob_safetynet.cli.ci_verdict import LISTED, audit_seen, preview_seen, verify_seen
from blob_safetynet.cli.exitcodes import MEANINGS, ExitCode


def finding(rule: str, account: str, state: str, severity: str = "high") -> dict[str, str]:
    return {
        "rule": rule,
        "account": account,
        "state": state,
        "severity": severity,
        "detail": f"{rule} detail",
    }


def test_exit_1_lists_the_failures_at_or_above_the_gate_only() -> None:
    """Below the gate, suppressed and baselined FAILs are not named; past LISTED, a count."""
    findings = [finding(f"SN-{n}", "a", "FAIL", "critical") for n in range(LISTED + 2)]
    findings += [finding("SN-LOW", "a", "FAIL", "low"), finding("SN-S", "a", "SUPPRESSED")]
    said = audit_seen(ExitCode.FINDINGS, {"findings": findings, "fail_on": "medium"}, False)
    assert said.startswith(f"{LISTED + 2} rules failed at or above medium: SN-0 on a, SN-1 on a")
    assert said.endswith(", and 2 more")
    assert "SN-LOW" not in said
    assert "SN-S" not in said


def test_exit_3_of_a_live_audit_names_read_errors_by_kind() -> None:
    """A live audit's exit 3 names each read error's account, operation and kind."""
    errors = [
        {
            "account": "locked",
            "operation": "roleAssignments",
            "kind": "permission",
            "message": "403",
        }
    ]
    said = audit_seen(ExitCode.INCOMPLETE, {"findings": [], "errors": errors}, False)
    assert said == "1 read error: locked roleAssignments: permission: 403"


def test_exit_3_of_files_with_no_account() -> None:
    """Files that describe no account: said so, with no word of authentication."""
    report = {"findings": [], "errors": [], "summary": {"accounts": 0}}
    said = audit_seen(ExitCode.INCOMPLETE, report, True)
    assert said == "no account in the files; no credential is used for saved files"


def test_exit_0_says_what_was_accepted_and_not_judged_from_files() -> None:
    """A green step still says how many FAILs it accepted and what files could not show."""
    findings = [finding("SN-A", "a", "BASELINED"), finding("SN-R", "a", "NOT_IN_FILES")]
    said = audit_seen(ExitCode.OK, {"findings": findings, "fail_on": "none"}, True)
    assert said == (
        "no rule fails the step and every verdict was reached; 1 FAIL suppressed or "
        "baselined, 1 NOT_IN_FILES (judged by a live audit)"
    )


def test_verify_names_failed_checks_and_what_stopped_the_run() -> None:
    """Verify's exit 1 names the failed checks and their detail, its exit 3 the reasons."""
    checks = [{"check": "SNV-CREATE-ONLY", "outcome": "FAIL", "detail": "overwritten"}]
    assert verify_seen(ExitCode.FINDINGS, {"checks": checks}) == (
        "1 check failed: SNV-CREATE-ONLY (overwritten)"
    )
    said = verify_seen(ExitCode.INCOMPLETE, {"checks": [], "incomplete": ["403 on put"]})
    assert said == "the run could not act: 403 on put"


def test_preview_names_the_mandatory_violations() -> None:
    """A preview's exit 1 quotes Pulumi's mandatory violation lines."""
    text = "Policy Violations:\n    [mandatory]  safetynet v0.1.0  sn-soft-delete (acct)\n"
    assert preview_seen(ExitCode.FINDINGS, text) == (
        "1 mandatory policy violation: [mandatory]  safetynet v0.1.0  sn-soft-delete (acct)"
    )


def test_codes_the_report_cannot_explain_keep_the_contracts_words() -> None:
    """Exit 4, 5 and the like are not in a report: the contract's words stand."""
    assert audit_seen(ExitCode.SERVICE_FAILED, {}, False) == MEANINGS[ExitCode.SERVICE_FAILED]
