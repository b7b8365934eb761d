"""The protocol's vocabulary: the tag, its values, the default container, the internal prefix.

The bottom layer: `infra/`, `blob_safetynet/policies/`, `blob_safetynet/sweeper/`, `testkit/` and the CLI may all import this
module; it imports only the standard library (tests/test_boundaries.py holds it to that).
"""

from typing import Final

DEFAULT_CONTAINER: Final = "documents"
DEFAULT_INVENTORY_CONTAINER: Final = "inventory"
"""Where the data account's Blob Inventory rule writes its reports (infra and reconcile)."""
INVENTORY_SCHEMA_FIELDS: Final = (
    "Name",
    "Creation-Time",
    "Last-Modified",
    "Etag",
    "Content-Length",
    "BlobType",
    "Tags",
)
"""The fields the inventory rule asks for (ARM's schemaFields spelling); reconcile reads Name,
Last-Modified and Tags, and a person comparing a plan with a report reads Etag."""
DEFAULT_TABLE: Final = "documents"
"""The documents table's name unless an application names its own."""
STATE_TAG: Final = "state"
PENDING: Final = "pending"
COMMITTED: Final = "committed"
RETIRED: Final = "retired"
"""A replaced or deleted document's old blob, tagged so its delete can be guarded too."""


def tag_condition(value: str) -> str:
    """The `x-ms-if-tags` expression that holds only while the state tag equals `value`."""
    return f"\"{STATE_TAG}\" = '{value}'"


HEARTBEAT_BLOB: Final = ".safetynet/sweeper.heartbeat.json"
"""Written by every sweeper run (CLI and Function), read by `safetynet verify`."""
HEARTBEAT_FINISHED_FIELD: Final = "finished_utc"
"""The heartbeat's ISO-8601 UTC time at which the run finished."""
HEARTBEAT_TABLE_FIELD: Final = "table"
"""The heartbeat's documents table (`schema.name` or `name`) that the run swept."""
VERIFY_PREFIX: Final = ".safetynet/verify/"
"""Probe blobs of `safetynet verify` live under `<VERIFY_PREFIX><run id>/`; nothing else does."""
HISTORY_PREFIX: Final = f"{VERIFY_PREFIX}history/"
"""Continuous verification's history: one JSON blob per run, create-only, never rewritten. Under
the verifier's prefix (its ABAC condition allows writes nowhere else) and inside `.safetynet/`,
which the sweeper and reconcile never touch."""
