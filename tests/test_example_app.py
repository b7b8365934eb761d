"""examples/app.py, run as a real process on Azurite and SQLite, does what its docstring says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED, STATE_TAG
from tests import tree
from tests.conftest import RunCli

pytestmark = pytest.mark.e2e  # examples/app.py as a real process

APP = Path(__file__).resolve().parents[1] / "examples" / "app.py"


class App:
    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env = env
        self.folder = folder

    def __call__(self, *argv: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, str(APP), *argv],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert "Traceback" not in result.stderr, result.stderr
        return result


@pytest.fixture
def app(tmp_path: Path, azurite: Azurite, container: ContainerClient, run_cli: RunCli) -> App:
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    assert run_cli("db", "init", "--db", db_url)[0] == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")}
    env |= {
        "SAFETYNET_DB_URL": db_url,
        "SAFETYNET_CONNECTION_STRING": azurite.connection_string,
        "SAFETYNET_CONTAINER": container.container_name,
    }
    return App(tree.environment(env), tmp_path)


def test_put_get_replace_delete_and_list(app: App, container: ContainerClient) -> None:
    """Each action exits 0; the bytes read back are the ones put; old blobs end retired."""
    (app.folder / "v1.pdf").write_bytes(b"%PDF first")
    (app.folder / "v2.pdf").write_bytes(b"%PDF second")
    assert app("put", "invoices/1.pdf", "v1.pdf").returncode == 0
    assert app("get", "invoices/1.pdf", "out.pdf").returncode == 0
    assert (app.folder / "out.pdf").read_bytes() == b"%PDF first"
    assert app("replace", "invoices/1.pdf", "v2.pdf").returncode == 0
    app("get", "invoices/1.pdf", "out.pdf")
    assert (app.folder / "out.pdf").read_bytes() == b"%PDF second"
    listed = app("list").stdout.split("\t")
    assert listed[:2] == ["invoices/1.pdf", "Ready"]
    assert app("delete", "invoices/1.pdf").returncode == 0
    assert app("list").stdout.strip() == ""
    states = sorted(
        container.get_blob_client(b.name).get_blob_tags()[STATE_TAG] for b in container.list_blobs()
    )
    assert states == [RETIRED, RETIRED]
    assert COMMITTED not in states


def test_a_missing_document_exits_1_and_a_missing_setting_exits_2(app: App) -> None:
    """No such name is the app's 'not found' (1); no database URL is a usage error (2)."""
    missing = app("get", "nothing.pdf", "out.pdf")
    assert missing.returncode == 1
    assert "no ready document named 'nothing.pdf'" in missing.stderr
    app.env.pop("SAFETYNET_DB_URL")
    unset = app("list")
    assert unset.returncode == 2
    assert "SAFETYNET_DB_URL is not set" in unset.stderr
