"""Old path of `blob_safetynet.settings.vocabulary`, kept for one release (CHANGELOG.md)."""

from blob_safetynet.settings.vocabulary import *  # noqa: F403
from blob_safetynet.sweeper._moved import alias

alias(__name__)
