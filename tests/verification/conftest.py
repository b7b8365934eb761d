"""The targets the probes act on: the embedded Azurite (shared key over HTTP, and a token over
HTTPS with `--oauth basic`), or a live account with `pytest -m verification --account-url URL`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from blob_safetynet.embedded.azurite import Azurite, AzuriteTls, create_unique_container
from blob_safetynet.policies.probes import Probe, ProbeOutcome, Target, run_probes
from blob_safetynet.policies.probes.runner import ProbeResult, VerificationRun
from testkit.service_doubles import EmulatorTokenCredential
from testkit.tls import TlsFiles, make_tls_files


@dataclass(frozen=True)
class ProbeTarget:
    """A service, its container, and the client options every probe client needs (TLS trust)."""

    name: str
    service: BlobServiceClient
    container: str
    options: dict[str, object]

    def target(self, **kwargs: object) -> Target:
        return Target(self.service, self.container, client_options=dict(self.options), **kwargs)  # type: ignore[arg-type]

    def run(self, probe: Probe, **kwargs: object) -> ProbeResult:
        return self.verify(probe, **kwargs).results[0]

    def verify(self, probe: Probe, **kwargs: object) -> VerificationRun:
        return run_probes(self.target(**kwargs), [probe])


def live_url(config: pytest.Config) -> str | None:
    value = config.getoption("--account-url")
    return str(value) if value else None


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A throwaway CA and a certificate for 127.0.0.1, made by this test run."""
    return make_tls_files(Path(tmp_path_factory.mktemp("tls")))


@pytest.fixture(scope="session")
def oauth_azurite(tls_files: TlsFiles) -> Iterator[Azurite]:
    """Azurite over HTTPS with `--oauth basic`: the key-less path production uses."""
    with Azurite(tls=AzuriteTls(tls_files.cert, tls_files.key, tls_files.ca)) as emulator:
        yield emulator


def _fresh_container(service: BlobServiceClient) -> str:
    return create_unique_container(service, "verify").container_name


@pytest.fixture(scope="module")
def key_target(azurite: Azurite) -> ProbeTarget:
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    return ProbeTarget("azurite-shared-key", service, _fresh_container(service), {})


@pytest.fixture(scope="session")
def token_target(oauth_azurite: Azurite, tls_files: TlsFiles) -> ProbeTarget:
    options: dict[str, object] = {"connection_verify": str(tls_files.ca)}
    service = BlobServiceClient(
        oauth_azurite.blob_endpoint, credential=EmulatorTokenCredential(), **options
    )
    return ProbeTarget("azurite-oauth-https", service, _fresh_container(service), options)


@pytest.fixture(scope="session")
def live_target(request: pytest.FixtureRequest) -> ProbeTarget:
    url = live_url(request.config)
    assert url is not None
    from azure.identity import DefaultAzureCredential

    service = BlobServiceClient(url, credential=DefaultAzureCredential())
    return ProbeTarget("live", service, str(request.config.getoption("--verify-container")), {})


TARGET_FIXTURES = {
    "azurite-key": "key_target",
    "azurite-token": "token_target",
    "live": "live_target",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each probe runs on Azurite with the account key over HTTP and with a bearer token over
    HTTPS; with --account-url, once, on the live account."""
    if "probe_target" in metafunc.fixturenames:
        names = ["live"] if live_url(metafunc.config) else ["azurite-key", "azurite-token"]
        metafunc.parametrize("probe_target", names, indirect=True)


@pytest.fixture
def probe_target(request: pytest.FixtureRequest) -> ProbeTarget:
    return request.getfixturevalue(TARGET_FIXTURES[request.param])  # type: ignore[no-any-return]


@pytest.fixture
def emulator_only(request: pytest.FixtureRequest) -> None:
    """Tests that break an emulator on purpose, or assert Azurite's exact outcomes."""
    if live_url(request.config):
        pytest.skip("asserts the embedded Azurite's behaviour; not run against --account-url")


def as_test_outcome(run: VerificationRun) -> None:
    """PASS passes; FAIL fails with the observed fact; NOT_VERIFIABLE skips with the reason;
    a run that could not act (no credential, no permission on its own probe blobs) fails, as
    `safetynet verify` exits 3 for it: "could not look" must not pass a pipeline."""
    if run.incomplete:
        pytest.fail("could not act: " + "; ".join(run.incomplete), pytrace=False)
    (result,) = run.results
    if result.outcome is ProbeOutcome.FAIL:
        pytest.fail(f"{result.probe.id}: {result.detail}", pytrace=False)
    if result.outcome is ProbeOutcome.NOT_VERIFIABLE:
        pytest.skip(f"{result.probe.id} not verifiable here: {result.detail}")
