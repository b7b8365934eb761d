"""Old path of `blob_safetynet.settings.redaction`, kept for one release (CHANGELOG.md)."""

from blob_safetynet.settings.redaction import *  # noqa: F403
from blob_safetynet.sweeper._moved import alias

alias(__name__)
