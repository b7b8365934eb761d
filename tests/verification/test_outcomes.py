"""What the embedded Azurite can and cannot show, exactly: the issue's done-when table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.storage.blob import BlobServiceClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.policies.probes import PROBES, ProbeOutcome, Target, run_probes
from tests.verification.conftest import ProbeTarget

pytestmark = [pytest.mark.verification, pytest.mark.usefixtures("emulator_only")]

PASS, NOT_VERIFIABLE = ProbeOutcome.PASS.value, ProbeOutcome.NOT_VERIFIABLE.value

ON_AZURITE_WITH_KEY = {
    "SNV-CREATE-ONLY": PASS,
    "SNV-CONCURRENT-CREATE": PASS,
    "SNV-TAG-GUARDED-DELETE": PASS,
    "SNV-CONDITIONAL-SEAL": NOT_VERIFIABLE,
    "SNV-SOFT-DELETE": NOT_VERIFIABLE,
    "SNV-NO-PERMANENT-DELETE": NOT_VERIFIABLE,
    "SNV-RECOVERY-DRILL": NOT_VERIFIABLE,
    "SNV-SHARED-KEY-OFF": NOT_VERIFIABLE,
    "SNV-PRIVATE-CONTAINER": PASS,
    "SNV-NO-PUBLIC-ACCESS": NOT_VERIFIABLE,
    "SNV-HTTPS-ONLY": NOT_VERIFIABLE,
    "SNV-TAG-WRITE-ROLE": NOT_VERIFIABLE,
    "SNV-SAS-TAG-PERMISSION": PASS,
    "SNV-PENDING-LIFECYCLE": NOT_VERIFIABLE,
    "SNV-SWEEPER-HEARTBEAT": NOT_VERIFIABLE,
}
ON_AZURITE_WITH_TOKEN = {
    **ON_AZURITE_WITH_KEY,
    # Azurite answers Get User Delegation Key with 500: no SAS without an account key.
    "SNV-SAS-TAG-PERMISSION": NOT_VERIFIABLE,
}
EMULATOR_REASONS = {
    "SNV-CONDITIONAL-SEAL": "ignored x-ms-if-tags",
    "SNV-SOFT-DELETE": "501",
    "SNV-RECOVERY-DRILL": "501",
    "SNV-SHARED-KEY-OFF": "loopback",
    "SNV-TAG-WRITE-ROLE": "enforces no RBAC",
    "SNV-PENDING-LIFECYCLE": "no lifecycle management",
}


def test_every_probe_has_an_expected_azurite_outcome() -> None:
    """The table below names every registered probe, so a new one must declare its outcome."""
    assert set(ON_AZURITE_WITH_KEY) == {p.id for p in PROBES}


def test_no_arguments_prints_the_table_and_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`safetynet verify` alone starts Azurite, prints one row per probe and exits 0."""
    code = main(["verify"])
    out = capsys.readouterr().out
    assert code == ExitCode.OK
    rows = {
        line.split()[0]: line.split()[2] for line in out.splitlines()[1:] if line.startswith("SNV-")
    }
    assert rows == ON_AZURITE_WITH_KEY
    assert "0 FAIL" in out


def test_outcomes_with_the_account_key(
    azurite: Azurite, key_target: ProbeTarget, tmp_path: Path
) -> None:
    """Through the CLI's JSON: each probe's outcome on Azurite, and why the emulator cannot show
    the rest, decided from what it did."""
    output = tmp_path / "verify.json"
    code = main(
        [
            "verify",
            "--connection-string",
            azurite.connection_string,
            "--container",
            key_target.container,
            "--format",
            "json",
            "--output",
            str(output),
        ]
    )
    document = json.loads(output.read_text())
    assert code == ExitCode.OK
    outcomes = {check["check"]: check["outcome"] for check in document["checks"]}
    assert outcomes == ON_AZURITE_WITH_KEY
    details = {check["check"]: check["detail"] for check in document["checks"]}
    for check, reason in EMULATOR_REASONS.items():
        assert reason in details[check], check
    assert {"check", "proves", "outcome", "detail"} <= set(document["checks"][0])
    declared = {p.id: p.requests for p in PROBES}
    assert all(c["requests"] <= declared[c["check"]] for c in document["checks"])


def test_outcomes_with_a_token_over_https(token_target: ProbeTarget) -> None:
    """The key-less path: the same probes with a bearer token over HTTPS (`--oauth basic`)."""
    run = run_probes(token_target.target(), PROBES)
    assert {r.probe.id: r.outcome.value for r in run.results} == ON_AZURITE_WITH_TOKEN
    assert all(r.requests <= r.probe.requests for r in run.results), "docs understate requests"
    assert not run.incomplete
    assert not token_target.target().uses_shared_key
    assert run.requests <= 100


class NoCredential:
    """A credential that cannot get a token, as DefaultAzureCredential on a machine without one."""

    def __init__(self) -> None:
        self.calls = 0

    def get_token(self, *scopes: str, **kwargs: object) -> object:
        self.calls += 1
        raise ClientAuthenticationError("no credential available")


def test_no_credential_stops_the_run_as_incomplete(token_target: ProbeTarget) -> None:
    """Without a token nothing is PASS: the run is incomplete and stops asking the credential."""
    credential = NoCredential()
    service = BlobServiceClient(
        token_target.service.url, credential=credential, **token_target.options
    )
    run = run_probes(
        Target(service, token_target.container, client_options=dict(token_target.options)), PROBES
    )
    assert run.incomplete
    assert ProbeOutcome.PASS not in {r.outcome for r in run.results}
    assert ProbeOutcome.FAIL not in {r.outcome for r in run.results}
    assert credential.calls <= 3
