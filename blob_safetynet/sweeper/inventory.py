"""Old path of `blob_safetynet.reconcile.inventory` (and of its part `inventory_report`), kept
for one release (CHANGELOG.md)."""

from blob_safetynet.reconcile.inventory import *  # noqa: F403
from blob_safetynet.reconcile.inventory_report import *  # noqa: F403
from blob_safetynet.sweeper._moved import alias

alias(__name__)
