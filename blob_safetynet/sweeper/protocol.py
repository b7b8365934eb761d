"""Old path of `blob_safetynet.protocol.upload`, kept for one release (CHANGELOG.md)."""

from blob_safetynet.protocol.upload import *  # noqa: F403
from blob_safetynet.sweeper._moved import alias

alias(__name__)
