"""Old path of `blob_safetynet.protocol.clients`, kept for one release (CHANGELOG.md)."""

from blob_safetynet.protocol.clients import *  # noqa: F403
from blob_safetynet.sweeper._moved import alias

alias(__name__)
