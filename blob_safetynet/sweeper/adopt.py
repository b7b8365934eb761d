"""Old path of `blob_safetynet.reconcile.adopt`, kept for one release (CHANGELOG.md)."""

from blob_safetynet.reconcile.adopt import *  # noqa: F403
from blob_safetynet.sweeper._moved import alias

alias(__name__)
