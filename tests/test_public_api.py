"""`blob_safetynet.protocol` states the public API once: what an application imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

import blob_safetynet.protocol as protocol
from blob_safetynet.protocol import clients, upload
from blob_safetynet.settings import appsettings
from blob_safetynet.store import documents, engine, tables
from tests import tree


def test_every_exported_name_is_the_object_its_module_defines() -> None:
    """Each name in `__all__` is the class or function of the module that defines it."""
    homes = (upload, documents, engine, tables, clients, appsettings)
    for name in protocol.__all__:
        defined = [getattr(home, name) for home in homes if name in vars(home)]
        assert defined, name
        assert getattr(protocol, name) is defined[0], name


def test_an_application_imports_the_protocol_the_store_and_the_errors_from_one_place() -> None:
    """The names of the quickstart come from `blob_safetynet.protocol`, and a name it does not
    export is an AttributeError, not a silent None."""
    from blob_safetynet.protocol import (
        DocumentStore,
        NameConflictError,
        UploadFailedError,
        UploadProtocol,
    )

    assert UploadProtocol is upload.UploadProtocol
    assert DocumentStore is documents.DocumentStore
    assert issubclass(UploadFailedError, upload.ProtocolError)
    assert NameConflictError is documents.NameConflictError
    with pytest.raises(AttributeError, match="no attribute 'Sweeper'"):
        _ = protocol.Sweeper


def test_one_module_of_the_package_loads_no_database_layer() -> None:
    """Importing `blob_safetynet.protocol.blobs` leaves SQLAlchemy unloaded: the exports are
    resolved on first use."""
    code = "import sys, blob_safetynet.protocol.blobs; print('sqlalchemy' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=tree.TREE,
        env=tree.environment(),
    )
    assert done.stdout.strip() == "False"
