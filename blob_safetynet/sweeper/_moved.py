"""The modules that left `blob_safetynet.sweeper` for packages named after what they hold, and
the alias that keeps each old path importing, with a DeprecationWarning, for one release
(CHANGELOG.md). Project code imports the new paths only (tests/test_boundaries.py)."""

from __future__ import annotations

import sys
import warnings
from typing import Final

MOVED: Final = {
    "blob_safetynet.sweeper.appsettings": "blob_safetynet.settings.appsettings",
    "blob_safetynet.sweeper.settings": "blob_safetynet.settings.parsed",
    "blob_safetynet.sweeper.vocabulary": "blob_safetynet.settings.vocabulary",
    "blob_safetynet.sweeper.redaction": "blob_safetynet.settings.redaction",
    "blob_safetynet.sweeper.atomicfile": "blob_safetynet.settings.atomicfile",
    "blob_safetynet.sweeper.endpoints": "blob_safetynet.settings.endpoints",
    "blob_safetynet.sweeper.untrusted": "blob_safetynet.settings.untrusted",
    "blob_safetynet.sweeper.signals": "blob_safetynet.settings.signals",
    "blob_safetynet.sweeper.store": "blob_safetynet.store.documents",
    "blob_safetynet.sweeper.protocol": "blob_safetynet.protocol.upload",
    "blob_safetynet.sweeper.blobs": "blob_safetynet.protocol.blobs",
    "blob_safetynet.sweeper.clients": "blob_safetynet.protocol.clients",
    "blob_safetynet.sweeper.pooling": "blob_safetynet.protocol.pooling",
    "blob_safetynet.sweeper.reconcile": "blob_safetynet.reconcile.listing",
    "blob_safetynet.sweeper.inventory": "blob_safetynet.reconcile.inventory",
    "blob_safetynet.sweeper.adopt": "blob_safetynet.reconcile.adopt",
}
"""Old dotted path: new dotted path."""
SPLIT: Final = {
    "blob_safetynet.sweeper.store": (
        "blob_safetynet.store.tables",
        "blob_safetynet.store.engine",
    ),
    "blob_safetynet.sweeper.inventory": ("blob_safetynet.reconcile.inventory_report",),
}
"""Old paths whose module was cut in parts after the move: the alias serves the names of all of
them, so it stays a module of its own rather than the new module itself."""


def alias(old: str) -> None:
    """Warns that `old` moved, then makes it the very module at its new path (the alias's own
    import already loaded it), so private names, patches and isinstance checks agree; an old
    module that was cut in parts stays the module that imported all their names."""
    new = MOVED[old]
    # stacklevel 3: past this function and the alias module, to the line that imported it
    # (warnings skips the import machinery's own frames).
    warnings.warn(
        f"{old} moved to {new}: import it from there; the old path goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    if old not in SPLIT:
        sys.modules[old] = sys.modules[new]
