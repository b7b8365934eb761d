"""A fleet's reports written from the spool: byte for byte the end-of-run writers' text for the
same results in the same order, with memory flat in the number of accounts, and no report that
looks complete after an interrupted run."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import signal
import subprocess
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blob_safetynet.cli.commands.audit import exit_code
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.policies.reports.formats import RENDERERS, WRITERS
from blob_safetynet.policies.reports.stream import Spool, SpooledReport
from blob_safetynet.policies.reports.stream import apply as apply_streaming
from blob_safetynet.policies.reports.view import STATES, HistoryRun, ReportContext, findings_of
from blob_safetynet.policies.rules import RULES, Finding, Outcome, suppressions
from blob_safetynet.policies.rules.model import Account, Thresholds
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.fleet import run_fleet_audit
from blob_safetynet.policies.sources.results import (
    AccountResult,
    AuditReport,
    ErrorKind,
    ReadError,
    Scope,
)
from testkit.arm_fake import TOKEN, Failure, FakeArm, fleet_subscription, mixed_fleet
from tests import tree
from tests.policies import stream_golden
from tests.policies.arm_env import use_fake_arm

ACCOUNTS = 30
SUBSCRIPTIONS = 3
FLEET = Scope("", management_groups=("mg-all",))
TODAY = dt.date.today()
GENERATED = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
MIB = 1 << 20


def serve_fleet(server: FakeArm) -> FakeArm:
    """A mixed fleet over three subscriptions, one account whose role assignments cannot be
    read (an account read error and UNKNOWN verdicts)."""
    server.graph_page_size = 7
    for account in mixed_fleet(ACCOUNTS, SUBSCRIPTIONS):
        server.add(account)
    server.accounts["fleet00004"].failures["roleAssignments"] = Failure(403)
    server.management_groups["mg-all"] = set(server.subscriptions())
    return server


@pytest.fixture(scope="module")
def judged() -> list[AccountResult]:
    """The fleet's results in the order they were judged."""
    results: list[AccountResult] = []
    with FakeArm(page_size=4) as server:
        serve_fleet(server)
        run_fleet_audit(
            FLEET,
            StaticTokenCredential(TOKEN),
            arm_endpoint=server.endpoint,
            connection_verify=server.ca_file,
            on_result=results.append,
            keep_results=False,
        )
    return results


def history() -> list[HistoryRun]:
    return [HistoryRun("old.json", {RULES[0].id: {**dict.fromkeys(STATES, 0), "FAIL": 3}})]


@st.composite
def audits(draw: st.DrawFn, results: list[AccountResult]) -> tuple[AuditReport, dict[str, object]]:
    """Some of the fleet's results in some order, scope errors or not, and suppressions
    (live, expired, unused) and a baseline of some FAILs, or none."""
    order = draw(st.lists(st.sampled_from(range(len(results))), unique=True))
    chosen = [results[number] for number in order]
    names = sorted({r.account.name for r in results})
    failing = sorted({f.rule.id for r in results for f in r.findings if f.outcome is Outcome.FAIL})
    patterns = st.sampled_from([*names[:5], "fleet0000*", "*", "nomatch*"])
    accepted = draw(
        st.lists(
            st.builds(
                suppressions.Suppression,
                st.sampled_from(failing) | st.sampled_from([rule.id for rule in RULES]),
                patterns,
                st.just("accepted for the test run"),
                st.sampled_from([TODAY - dt.timedelta(days=1), TODAY + dt.timedelta(days=9)]),
            ),
            max_size=4,
        )
    )
    fails = sorted(
        {suppressions.key(f) for r in chosen for f in r.findings if f.outcome is Outcome.FAIL},
        key=str,
    )
    every = draw(st.integers(0, 3))
    baseline = (
        suppressions.Baseline(
            "base.json", frozenset([*fails[::every], ("SN-SHARED-KEY-OFF", "gone", None)])
        )
        if every
        else None
    )
    errors = draw(st.sampled_from([[], [ReadError(None, "list mg", ErrorKind.PERMISSION, "no")]]))
    report = AuditReport(FLEET, Thresholds(), chosen, errors, seconds=draw(st.floats(0, 99)))
    return report, {"accepted": accepted, "baseline": baseline, "history": draw(st.booleans())}


def by_account(results: list[AccountResult]) -> list[AccountResult]:
    """The order of every in-memory report (`run_audit`, `run_fleet_audit`)."""
    return sorted(results, key=lambda r: (r.account.name, r.account.resource_id or ""))


def spooled(report: AuditReport, spool: Spool) -> SpooledReport:
    for result in report.results:
        spool.append(result)
    return SpooledReport(
        report.scope, report.thresholds, spool, report.errors, report.rules, report.seconds
    )


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_every_format_from_the_spool_equals_the_end_of_run_report(
    judged: list[AccountResult], data: st.DataObject
) -> None:
    """For any results of a fleet on the fake ARM, appended in any order, with any suppressions
    and baseline, each format written from the spool (suppressions applied in one pass) is the
    end-of-run writer's text for the results sorted by account, byte for byte, and the notes and
    exit code are the same."""
    drawn, given_ = data.draw(audits(judged))
    report = dataclasses.replace(drawn, results=by_account(drawn.results))
    accepted, baseline = given_["accepted"], given_["baseline"]
    assert isinstance(accepted, list)
    assert baseline is None or isinstance(baseline, suppressions.Baseline)
    runs = history() if given_["history"] else []
    end = ReportContext(
        suppressions.apply(report.findings, accepted, TODAY, baseline), runs, GENERATED
    )
    with Spool() as spool:
        streamed = spooled(drawn, spool)
        applied = apply_streaming(findings_of(streamed), accepted, TODAY, baseline)
        context = ReportContext(applied, runs, GENERATED)
        for name, render in RENDERERS.items():
            assert "".join(WRITERS[name](streamed, context)) == render(report, end), name
        assert context.applied.notes() == end.applied.notes()
        for fail_on in ("low", "critical", "none"):
            assert exit_code(streamed, context, fail_on) == exit_code(report, end, fail_on)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArm]:
    with FakeArm(page_size=4) as server:
        serve_fleet(server)
        use_fake_arm(server, monkeypatch)
        yield server


def unstamped(text: str) -> str:
    """The text without what differs between two runs: wall clock times and the HTML's date."""
    text = re.sub(r'<testsuites ([^>]*)time="[0-9.]+"', r"<testsuites \1", text)
    return re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?(\+00:00| UTC|Z)", "DATE", text)


def test_fleet_cli_reports_equal_the_end_of_run_writers(fake: FakeArm, tmp_path: Path) -> None:
    """`safetynet audit --management-group` writes every format, with a suppression, as the end-
    of-run writer renders the same results sorted by account, whatever order they were judged
    in."""
    rules = tmp_path / "accepted.json"
    entry = {"rule": "SN-NO-PUBLIC-ACCESS", "resource": "fleet0000*", "justification": "x" * 12}
    rules.write_text(json.dumps({"suppressions": [{**entry, "expires": str(TODAY)}]}))
    outputs = [f"--output={name}={tmp_path / name}" for name in RENDERERS]
    code = main(["audit", "--management-group", "mg-all", "--suppressions", str(rules), *outputs])
    results: list[AccountResult] = []
    report = run_fleet_audit(
        FLEET,
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
        on_result=results.append,
        keep_results=False,
    )
    report.results = by_account(results)
    accepted, file = suppressions.read(rules, [rule.id for rule in RULES])
    applied = suppressions.apply(report.findings, accepted, TODAY)
    context = ReportContext(applied, [], GENERATED, inputs=[file], fail_on="high")
    assert code == exit_code(report, context, "high") == ExitCode.FINDINGS
    for name, render in RENDERERS.items():
        written = (tmp_path / name).read_text(encoding="utf-8")
        assert unstamped(written) == unstamped(render(report, context)), name
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def synthetic(count: int) -> Iterator[AccountResult]:
    """`count` accounts, each with a verdict of every outcome on a few rules."""
    outcomes = list(Outcome)
    for number in range(count):
        name = f"acct{number:06d}"
        where = (
            f"/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/{name}"
        )
        findings = [
            Finding(
                rule,
                name,
                where,
                outcomes[(number + index) % len(outcomes)],
                f"{rule.title} on {name}",
            )
            for index, rule in enumerate(RULES[:6])
        ]
        yield AccountResult(Account(name=name, resource_id=where), findings)


class Sink:
    """A text file that counts what it is given and keeps none of it."""

    def __init__(self) -> None:
        self.chars = 0

    def write(self, text: str) -> None:
        self.chars += len(text)


def writers_peak(count: int) -> dict[str, tuple[int, int]]:
    """Per format, (peak bytes traced while it is written, characters written) for `count`
    accounts spooled first."""
    scope = Scope("", management_groups=("mg",))
    peaks = {}
    with Spool() as spool:
        for result in synthetic(count):
            spool.append(result)
        report = SpooledReport(scope, Thresholds(), spool)
        context = ReportContext(apply_streaming(findings_of(report), [], TODAY), [], GENERATED)
        for name, writer in WRITERS.items():
            sink = Sink()
            tracemalloc.start()
            try:
                for chunk in writer(report, context):
                    sink.write(chunk)
                peaks[name] = (tracemalloc.get_traced_memory()[1], sink.chars)
            finally:
                tracemalloc.stop()
    return peaks


def test_writers_memory_is_flat_in_the_number_of_accounts() -> None:
    """Each format written for 400 spooled accounts (2,400 findings) peaks at most 1.2 times
    the traced memory for 40 plus 256 KiB, while the text written is five or more times longer (the
    Markdown's is capped by its budget). tracemalloc counts allocations, not pages, so the bound
    holds on a loaded machine; the sizes are small because tracing slows the writers about
    sixfold (docs/policies.md has the CLI's peak RSS for 1,000 and 10,000 accounts). A first run
    compiles the template and fills the caches, which the two measured runs then share."""
    writers_peak(2)
    small, large = writers_peak(40), writers_peak(400)
    for name, (peak, chars) in large.items():
        assert name == "markdown" or chars > 5 * small[name][1], name
        assert peak <= 1.2 * small[name][0] + MIB / 4, (name, small[name][0], peak)


def fleet_cli(server: FakeArm, folder: Path) -> subprocess.Popen[str]:
    """`safetynet audit` of the fleet in a child process, JSON to a file and the verdicts as
    JSON Lines, one account at a time."""
    env = tree.environment(
        {
            **os.environ,
            "SAFETYNET_ARM_TOKEN": TOKEN,
            "REQUESTS_CA_BUNDLE": server.ca_file,
            "AZURE_SUBSCRIPTION_ID": fleet_subscription(0),
            "SAFETYNET_ARM_ENDPOINT": server.endpoint,
        }
    )
    command = [*tree.MODULE, "audit", "--management-group", "mg-all"]
    command += ["--concurrency", "1", "--stream", str(folder / "verdicts.jsonl")]
    command += [
        "--output",
        f"json={folder / 'report.json'}",
        "--output",
        f"sarif={folder / 'report.sarif'}",
    ]
    return subprocess.Popen(
        command,
        env=env,
        cwd=tree.TREE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    ("stop", "code"),
    [(signal.SIGINT, ExitCode.INTERRUPTED), (signal.SIGTERM, ExitCode.TERMINATED)],
    ids=["SIGINT", "SIGTERM"],
)
def test_interrupted_fleet_audit_leaves_no_report(
    tmp_path: Path, stop: signal.Signals, code: ExitCode
) -> None:
    """A signal while the fleet is judged ends the run with 130 or 143, and neither report file
    nor a temporary one beside it is left; the JSON Lines hold what was judged."""
    with FakeArm(page_size=4, latency_seconds=0.05) as server:
        serve_fleet(server)
        child = fleet_cli(server, tmp_path)
        stream = tmp_path / "verdicts.jsonl"
        deadline = time.monotonic() + 60
        while not (stream.exists() and stream.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(stop)
        _, err = child.communicate(timeout=60)
    assert child.returncode == code, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verdicts.jsonl"]


@settings(max_examples=60, deadline=None)
@given(
    accepted=st.lists(
        st.builds(
            suppressions.Suppression,
            st.sampled_from([rule.id for rule in RULES[:7]]),
            st.sampled_from(["acct00000*", "*", "acct000003", "nomatch"]),
            st.just("accepted for the test run"),
            st.sampled_from([TODAY - dt.timedelta(days=1), TODAY, TODAY + dt.timedelta(days=9)]),
        ),
        max_size=5,
    ),
    every=st.integers(0, 3),
)
def test_one_pass_apply_decides_as_apply(
    accepted: list[suppressions.Suppression], every: int
) -> None:
    """Suppressions applied in one pass cover each finding with the suppression (or baseline
    entry) `suppressions.apply` chooses, and report the same expired, unused and no longer
    failing ones."""
    findings = [f for result in synthetic(40) for f in result.findings]
    fails = [suppressions.key(f) for f in findings if f.outcome is Outcome.FAIL]
    baseline = (
        suppressions.Baseline("base.json", frozenset([*fails[::every], ("SN-X", "gone", None)]))
        if every
        else None
    )
    expected = suppressions.apply(findings, accepted, TODAY, baseline)
    applied = apply_streaming(iter(findings), accepted, TODAY, baseline)
    assert [applied.of(f) for f in findings] == [expected.of(f) for f in findings]
    assert applied.notes() == expected.notes()


def test_writers_keep_the_text_of_the_end_of_run_writers() -> None:
    """Every format of three fixed reports (hostile text, duplicate names, errors, suppressions,
    baseline, history; a fleet, a resource group, files) hashes as the text the writers gave
    when they held every result in memory (tests/policies/stream_golden.py)."""
    saved = json.loads(stream_golden.GOLDEN.read_text(encoding="utf-8"))
    assert stream_golden.digests() == saved
