"""Old path of `blob_safetynet.reconcile.inventory`, kept for one release (CHANGELOG.md)."""

from blob_safetynet.reconcile.inventory import *  # noqa: F403
from blob_safetynet.sweeper._moved import alias

alias(__name__)
