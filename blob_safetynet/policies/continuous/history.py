"""Continuous verification's history: one JSON blob per run, append-only, and its bounded reading.

Each run writes `<HISTORY_PREFIX><run id>.json` create-only (If-None-Match: *), untagged, so
neither the lifecycle rule (it deletes only blobs tagged `state=pending`) nor the sweeper (it
never touches `.safetynet/`) removes it, and no later run can rewrite an earlier one's record.
Reading is bounded: at most `limit` records, each at most `MAX_RECORD_BYTES`; a blob that is too
large, not JSON or not of the record's shape is reported by name, never trusted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobType, ContainerClient

from blob_safetynet.policies.probes.base import describe_refusal
from blob_safetynet.settings import untrusted
from blob_safetynet.settings.vocabulary import HISTORY_PREFIX

SCHEMA: Final = "safetynet.verify.history/1"
MAX_RECORD_BYTES: Final = 1024 * 1024
"""A run of some thirty checks writes a few KiB; anything larger is not a record of ours."""
DEFAULT_LIMIT: Final = 30
MAX_LIMIT: Final = 1000
CHECK_FIELDS: Final = ("kind", "id", "outcome", "detail")


class HistoryError(RuntimeError):
    """The history could not be written or listed; the message says which blob and why."""


def history_name(run_id: str) -> str:
    return f"{HISTORY_PREFIX}{run_id}.json"


def write_record(container: ContainerClient, record: Mapping[str, Any]) -> str:
    """Create the run's history blob, refused if it exists (a record is never rewritten)."""
    name = history_name(str(record["run_id"]))
    body = json.dumps(record, sort_keys=True, ensure_ascii=True).encode()
    try:
        container.get_blob_client(name).upload_blob(
            body,
            blob_type=BlobType.BLOCKBLOB,
            overwrite=False,
            match_condition=MatchConditions.IfMissing,
        )
    except HttpResponseError as error:
        raise HistoryError(f"history {name}: {describe_refusal(error)}") from None
    return name


@dataclass
class History:
    """The records read, oldest first, and the blobs that were not records."""

    records: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    """`<name>: <why>` for each blob skipped (too large, not JSON, wrong shape)."""


def read_history(container: ContainerClient, *, limit: int = DEFAULT_LIMIT) -> History:
    """The newest `limit` records (run ids sort by time), returned oldest first."""
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}")
    try:
        items = [
            (item.name, item.size)
            for item in container.list_blobs(name_starts_with=HISTORY_PREFIX)
            if item.name.endswith(".json")
        ]
    except ResourceNotFoundError:
        raise  # the container does not exist: the caller's usage error, not a history fault
    except HttpResponseError as error:
        raise HistoryError(f"listing {HISTORY_PREFIX}: {describe_refusal(error)}") from None
    history = History()
    for name, size in sorted(items)[-limit:]:
        if size is None or size > MAX_RECORD_BYTES:
            history.rejected.append(f"{name}: larger than {MAX_RECORD_BYTES} bytes")
            continue
        body = container.get_blob_client(name).download_blob(max_concurrency=1).readall()
        problem, record = parse_record(body[: MAX_RECORD_BYTES + 1])
        if record is None:
            history.rejected.append(f"{name}: {problem}")
        else:
            history.records.append(record)
    return history


def parse_record(body: bytes) -> tuple[str, dict[str, Any] | None]:
    """(why not, None) or ("", the record) for one blob's bytes."""
    if len(body) > MAX_RECORD_BYTES:
        return f"larger than {MAX_RECORD_BYTES} bytes", None
    try:
        record = untrusted.load_json(body, "the record", max_bytes=MAX_RECORD_BYTES)
    except untrusted.UntrustedInputError as error:
        return f"not JSON ({str(error).removeprefix('the record ')})", None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        return f"not a {SCHEMA} record", None
    checks = record.get("checks")
    if not isinstance(record.get("run_id"), str) or not isinstance(checks, list):
        return "no run_id or checks", None
    if not all(
        isinstance(check, dict) and all(isinstance(check.get(f), str) for f in CHECK_FIELDS)
        for check in checks
    ):
        return "a check without kind, id, outcome and detail as text", None
    return "", record
