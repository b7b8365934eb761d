"""The upload protocol an application uses: content records, blob writes under conditions, and
the blob clients built once per process.

May import the store and the settings packages (tests/test_boundaries.py). What an application
needs is exported here, once:

    from blob_safetynet.protocol import DocumentStore, UploadProtocol, blob_service_client

The names are loaded on first use, so importing one module of the package (`blobs`, say) does
not load the store and SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from blob_safetynet.protocol.clients import blob_service_client
    from blob_safetynet.protocol.upload import (
        ConcurrentReplaceError,
        ContentMismatchError,
        InvalidNameError,
        OperationFailedError,
        ProtocolError,
        ReservationExpiredError,
        UploadFailedError,
        UploadProtocol,
    )
    from blob_safetynet.settings.appsettings import SettingsError
    from blob_safetynet.store.documents import DocumentStore, NameConflictError
    from blob_safetynet.store.engine import DatabaseTokenError, StoreError
    from blob_safetynet.store.tables import Document, DocumentTable, Status

_UPLOAD: Final = frozenset(
    {
        "ConcurrentReplaceError",
        "ContentMismatchError",
        "InvalidNameError",
        "OperationFailedError",
        "ProtocolError",
        "ReservationExpiredError",
        "UploadFailedError",
        "UploadProtocol",
    }
)
_STORE: Final = frozenset({"DocumentStore", "NameConflictError"})
_ENGINE: Final = frozenset({"DatabaseTokenError", "StoreError"})
_TABLES: Final = frozenset({"Document", "DocumentTable", "Status"})

__all__ = [
    "ConcurrentReplaceError",
    "ContentMismatchError",
    "DatabaseTokenError",
    "Document",
    "DocumentStore",
    "DocumentTable",
    "InvalidNameError",
    "NameConflictError",
    "OperationFailedError",
    "ProtocolError",
    "ReservationExpiredError",
    "SettingsError",
    "Status",
    "StoreError",
    "UploadFailedError",
    "UploadProtocol",
    "blob_service_client",
]


def __getattr__(name: str) -> Any:
    """An exported name, from the module that defines it (PEP 562)."""
    if name in _UPLOAD:
        from blob_safetynet.protocol import upload

        return getattr(upload, name)
    if name in _STORE:
        from blob_safetynet.store import documents

        return getattr(documents, name)
    if name in _ENGINE:
        from blob_safetynet.store import engine

        return getattr(engine, name)
    if name in _TABLES:
        from blob_safetynet.store import tables

        return getattr(tables, name)
    if name == "blob_service_client":
        from blob_safetynet.protocol import clients

        return clients.blob_service_client
    if name == "SettingsError":
        from blob_safetynet.settings import appsettings

        return appsettings.SettingsError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
