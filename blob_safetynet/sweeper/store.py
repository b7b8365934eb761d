"""Old path of `blob_safetynet.store.documents` (and of its parts `tables` and `engine`), kept
for one release (CHANGELOG.md)."""

from blob_safetynet.store.documents import *  # noqa: F403
from blob_safetynet.store.engine import *  # noqa: F403
from blob_safetynet.store.tables import *  # noqa: F403
from blob_safetynet.sweeper._moved import alias

alias(__name__)
