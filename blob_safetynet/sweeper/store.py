"""Old path of `blob_safetynet.store.documents`, kept for one release (CHANGELOG.md)."""

from blob_safetynet.store.documents import *  # noqa: F403
from blob_safetynet.sweeper._moved import alias

alias(__name__)
