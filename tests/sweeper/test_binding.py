"""A container and a database are swept together only once bound: by a person, or by a first
sweep that proves they belong together. A mismatched pair is refused with nothing changed."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.embedded.crash import SimulatedCrash, crash_after
from blob_safetynet.function import sweep as sweep_function
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import RepairRefusedError, reconcile
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status
from blob_safetynet.sweeper import binding
from tests.conftest import RunCli
from tests.sweeper.conftest import age_row, stale_rows_in
from tests.sweeper.conftest import target_options as target

FUTURE = datetime.now(UTC) + timedelta(hours=1)


@dataclass
class Deployment:
    """One never-swept deployment: its database and its container, with documents in both."""

    url: str
    store: DocumentStore
    container: ContainerClient
    ready: Document
    sealed: Document

    def target(self, azurite: Azurite, container: ContainerClient | None = None) -> list[str]:
        return target(self.url, azurite, container or self.container)


def deployment(url: str, container: ContainerClient) -> Deployment:
    """A Ready document and a sealed upload whose publish never happened, both an hour old."""
    store = DocumentStore.from_url(url)
    store.init_schema()
    protocol = UploadProtocol(store, container)
    ready = protocol.put("ready.txt", b"published", ".txt")
    protocol.checkpoint = crash_after("seal")
    with pytest.raises(SimulatedCrash):
        protocol.put("sealed.txt", b"sealed, to roll forward", ".txt")
    for document_id in (ready.id, store.get_by_name("sealed.txt").id):  # type: ignore[union-attr]
        age_row(store, document_id, timedelta(hours=1))
    sealed = store.get_by_name("sealed.txt")
    assert sealed is not None
    return Deployment(url, store, container, ready, sealed)


@pytest.fixture
def staging(db_url: str, container_factory: Callable[[], ContainerClient]) -> Deployment:
    return deployment(db_url, container_factory())


@pytest.fixture
def prod(tmp_path: Path, container_factory: Callable[[], ContainerClient]) -> Deployment:
    return deployment(f"sqlite:///{tmp_path / 'prod.db'}", container_factory())


def test_a_first_sweep_of_a_mismatched_pair_is_refused_with_nothing_changed(
    run_cli: RunCli, azurite: Azurite, staging: Deployment, prod: Deployment
) -> None:
    """`sweep --db <staging> --container <prod>` exits 2 naming the bind command: no staging
    row is deleted as never landed, and neither side is bound."""
    code, out, err = run_cli("sweep", *staging.target(azurite, prod.container), "--json")

    assert code == ExitCode.USAGE
    assert "cannot prove they belong together" in err
    assert f"{binding.BIND_COMMAND} --db URL --container {prod.container.container_name}" in err
    assert json.loads(out)["error"]["exit_code"] == ExitCode.USAGE
    assert {d.id for d in staging.store.all()} == {staging.ready.id, staging.sealed.id}
    assert staging.store.bound_container() is None
    assert blobs.bound_database(prod.container) is None


def test_first_sweeps_of_the_right_pairs_prove_and_bind_them(
    run_cli: RunCli, azurite: Azurite, staging: Deployment, prod: Deployment
) -> None:
    """A first sweep finding its rows' blobs in the container binds the pair and rolls the
    sealed upload forward."""
    for side in (staging, prod):
        code, out, _ = run_cli("sweep", *side.target(azurite), "--json")
        assert code == ExitCode.OK
        assert json.loads(out)["rolled_forward"] == 1
        assert binding.read_binding(side.store, side.container).bound
        assert side.store.get(side.sealed.id) is not None


def test_an_unprovable_pair_is_swept_once_a_person_binds_it(
    run_cli: RunCli, azurite: Azurite, db_url: str, container: ContainerClient
) -> None:
    """Rows whose uploads never landed prove nothing: the sweep refuses until `binding bind`,
    then sweeps; `binding show` tells both halves before and after."""
    store = DocumentStore.from_url(db_url)
    store.init_schema()
    stale_rows_in(store, container, 2, with_blobs=False)
    options = target(db_url, azurite, container)
    assert run_cli("sweep", *options)[0] == ExitCode.USAGE
    code, out, _ = run_cli("binding", "show", *options, "--json")
    assert (code, json.loads(out)["bound"]) == (ExitCode.FINDINGS, False)

    assert run_cli("binding", "bind", *options)[0] == ExitCode.OK

    code, out, _ = run_cli("binding", "show", *options, "--json")
    shown = json.loads(out)
    assert (code, shown["bound"]) == (ExitCode.OK, True)
    assert shown["container_bound_to"] == store.database_id()
    code, out, _ = run_cli("sweep", *options, "--json")
    assert (code, json.loads(out)["missing_blobs"]) == (ExitCode.OK, 2)


def test_unbind_undoes_a_wrong_binding_on_both_sides(
    run_cli: RunCli, azurite: Azurite, staging: Deployment, prod: Deployment
) -> None:
    """A pair bound by mistake is unbound on both sides; the right sweeps then run again."""
    assert run_cli("binding", "bind", *staging.target(azurite, prod.container))[0] == 0
    assert run_cli("sweep", *prod.target(azurite))[0] == ExitCode.USAGE

    code, out, _ = run_cli("binding", "unbind", *staging.target(azurite, prod.container))

    assert code == ExitCode.OK
    assert "not bound to each other" in out
    assert staging.store.bound_container() is None
    assert blobs.bound_database(prod.container) is None
    assert run_cli("sweep", *prod.target(azurite))[0] == ExitCode.OK
    assert run_cli("sweep", *staging.target(azurite))[0] == ExitCode.OK


def test_bind_refuses_a_half_bound_elsewhere(
    run_cli: RunCli, azurite: Azurite, staging: Deployment, prod: Deployment
) -> None:
    """`binding bind` never overwrites a half that names another side: exit 2, unbind first."""
    assert run_cli("binding", "bind", *prod.target(azurite))[0] == ExitCode.OK
    code, _, err = run_cli("binding", "bind", *staging.target(azurite, prod.container))
    assert code == ExitCode.USAGE
    assert binding.UNBIND_COMMAND in err
    assert staging.store.bound_container() is None
    assert blobs.bound_database(prod.container) == prod.store.database_id()


def test_repair_is_refused_when_the_database_names_another_container(
    staging: Deployment, prod: Deployment
) -> None:
    """Reconcile's repair checks both halves: a marker naming this database is not enough
    when the database is bound to another container."""
    blobs.bind(prod.container, staging.store.database_id())
    staging.store.bind_container(binding.identity(staging.container))
    with pytest.raises(RepairRefusedError, match="belongs to container"):
        reconcile(staging.store, prod.container, FUTURE, repair=True)


def test_the_function_refuses_an_unbound_pair_with_a_log_line(
    azurite: Azurite,
    staging: Deployment,
    prod: Deployment,
    caplog: pytest.LogCaptureFixture,
    function_app: ModuleType,
) -> None:
    """A timer tick on a mismatched pair logs why it refused and fails the invocation."""
    settings = {
        "SAFETYNET_DB_URL": staging.url,
        "SAFETYNET_CONNECTION_STRING": azurite.connection_string,
        "SAFETYNET_CONTAINER": prod.container.container_name,
        "SAFETYNET_CUTOFF": "15m",
        "SAFETYNET_SCHEDULE": "0 */5 * * * *",
    }
    with caplog.at_level(logging.INFO), pytest.raises(sweep_function.SweepFailedError):
        function_app.sweep_once(settings)
    [refusal] = [r for r in caplog.records if r.getMessage().startswith("sweep refused:")]
    assert refusal.levelno == logging.ERROR
    assert binding.BIND_COMMAND in refusal.getMessage()
    assert staging.store.count(Status.PENDING) == 1
