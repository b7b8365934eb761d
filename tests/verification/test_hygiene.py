"""A run touches only what it created, cleans up after itself, and stays within its budget."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from azure.core.exceptions import AzureError
from azure.storage.blob import BlobServiceClient

from blob_safetynet.cli.commands.verify import exit_code
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.function.drill import recovery_drill
from blob_safetynet.policies.probes import (
    PROBES,
    Observation,
    Probe,
    ProbeOutcome,
    Target,
    run_probes,
)
from blob_safetynet.policies.probes.liveness import CANARY
from blob_safetynet.settings.vocabulary import (
    COMMITTED,
    HEARTBEAT_BLOB,
    PENDING,
    STATE_TAG,
    VERIFY_PREFIX,
)
from testkit.fault_proxy import LatencyProxy
from testkit.service_doubles import RecordingCounter

pytestmark = [pytest.mark.verification, pytest.mark.usefixtures("emulator_only")]

REQUEST_BUDGET = 100
DOCUMENT = "3f2a9c.pdf"
OTHER_RUN = f"{VERIFY_PREFIX}20260101T000000Z-abcdef/create-only"


def test_a_run_stays_in_its_prefix_within_budget(azurite: Azurite) -> None:
    """Every probe (the recovery drill with its recovery code) through a counting proxy: at
    most ~100 requests (the proxy and the run's own counter agree), no write outside the run's
    prefix, documents and other runs untouched, and only the canary left behind."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    container = admin.create_container("hygiene")
    document = container.upload_blob(DOCUMENT, b"a document", tags={STATE_TAG: COMMITTED})
    other = container.upload_blob(OTHER_RUN, b"another run", tags={STATE_TAG: PENDING})
    before = {
        name: container.get_blob_client(name).get_blob_properties().etag
        for name in (DOCUMENT, OTHER_RUN)
    }
    counter = RecordingCounter()
    with LatencyProxy(azurite.port, delay_s=0.0) as proxy:
        service = BlobServiceClient.from_connection_string(proxy.connection_string)
        with recovery_drill() as drill:
            target = Target(service, "hygiene", counter=counter, recovery=drill)
            run = run_probes(target, PROBES)
        sent = sum(proxy.counts().values())
    assert sent == run.requests == counter.count
    assert run.requests <= REQUEST_BUDGET
    assert not run.leftovers
    for method, url in counter.requests:
        path = unquote(urlsplit(url).path).split("/", 3)
        name = path[3] if len(path) == 4 else ""
        query = parse_qs(urlsplit(url).query)
        if name.startswith(target.prefix):
            continue
        if name == HEARTBEAT_BLOB:
            assert method == "GET"
        elif not name and query.get("comp") is None:
            # The connection check before the probes: Get Container Properties, a read.
            assert (method, query.get("restype")) == ("GET", ["container"]), url
        else:
            assert (method, query.get("comp")) == ("GET", ["list"]), url
            assert query["prefix"][0].startswith(VERIFY_PREFIX)
    after = {
        name: container.get_blob_client(name).get_blob_properties().etag
        for name in (DOCUMENT, OTHER_RUN)
    }
    assert after == before
    assert document.get_blob_tags() == {STATE_TAG: COMMITTED}
    assert other.get_blob_tags() == {STATE_TAG: PENDING}
    left = [b.name for b in container.list_blobs(name_starts_with=target.prefix)]
    assert left == [f"{target.prefix}canary"]
    assert container.get_blob_client(left[0]).get_blob_tags() == {STATE_TAG: PENDING}
    admin.delete_container("hygiene")


def _interrupted(target: Target) -> Observation:
    target.create(target.blob("interrupted"), b"probe")
    target.create(target.blob(CANARY), b"canary", canary=True)
    raise KeyboardInterrupt


INTERRUPTED = Probe(
    id="SNV-TEST-INTERRUPTED",
    title="creates two probe blobs, then the person presses Ctrl-C",
    proves=(),
    action="",
    reference="",
    requests=2,
    on_emulator="",
    on_live="",
    run=_interrupted,
)


def test_an_interrupted_run_still_cleans_up(azurite: Azurite) -> None:
    """Ctrl-C in the middle of a probe: the interrupt goes on, after the run's probe blobs are
    deleted (the canary kept)."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    container = admin.create_container("interrupted")
    target = Target(admin, "interrupted")
    with pytest.raises(KeyboardInterrupt):
        run_probes(target, [INTERRUPTED])
    left = [b.name for b in container.list_blobs(name_starts_with=target.prefix)]
    admin.delete_container("interrupted")
    assert left == [f"{target.prefix}{CANARY}"]


def _transport_broke(target: Target) -> Observation:
    target.create(target.blob("broken-stream"), b"probe")
    raise AzureError("the response stream was closed")


TRANSPORT_BROKE = Probe(
    id="SNV-TEST-TRANSPORT",
    title="creates a probe blob, then the SDK raises an AzureError that is no HTTP answer",
    proves=(),
    action="",
    reference="",
    requests=1,
    on_emulator="",
    on_live="",
    run=_transport_broke,
)


def test_an_sdk_error_without_an_answer_is_could_not_act(azurite: Azurite) -> None:
    """An AzureError that carries no HTTP answer: NOT_VERIFIABLE and an incomplete run (exit 3),
    not a crash the shell reads as exit 1 (FAIL); the probe blob is still deleted."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    container = admin.create_container("transport")
    target = Target(admin, "transport")
    run = run_probes(target, [TRANSPORT_BROKE])
    left = [b.name for b in container.list_blobs(name_starts_with=target.prefix)]
    admin.delete_container("transport")
    assert run.results[0].outcome is ProbeOutcome.NOT_VERIFIABLE
    assert "AzureError" in run.results[0].detail
    assert "stream was closed" not in run.results[0].detail
    assert exit_code(run) == ExitCode.INCOMPLETE
    assert left == []
