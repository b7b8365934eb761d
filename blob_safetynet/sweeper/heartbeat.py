"""The sweeper's heartbeat: a small blob, rewritten after every run, that says it is alive.

`safetynet verify` reads it to prove the deployed sweeper runs (the last run within three
schedule periods). It lives under the toolkit's internal prefix, carries no `state` tag (so the
lifecycle rule for pending blobs never collects it) and holds only times and counts: never a
document name, a database URL or an error text (the table's name, so `verify --table` can tell
which table the sweeper that wrote it cleans).

Every write carries a condition, like every other write in this project: the first one is
create-only, later ones replace only the heartbeat they read (If-Match). Two sweepers finishing
at once race; the loser's 409/412 means the other one just wrote a heartbeat, which is what the
reader needs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.settings.vocabulary import (
    HEARTBEAT_BLOB,
    HEARTBEAT_FINISHED_FIELD,
    HEARTBEAT_TABLE_FIELD,
)

log = logging.getLogger("safetynet.sweeper")

LOST_RACE_STATUSES = frozenset({409, 412})


def heartbeat_body(
    summary: Mapping[str, Any], source: str, finished: datetime, table: str | None = None
) -> bytes:
    """The heartbeat's JSON: finish time, who ran, which table it swept, whether it stopped
    early, and the run's counts (lists become counts)."""
    counts = {
        key: len(value) if isinstance(value, list | tuple) else value
        for key, value in summary.items()
        if isinstance(value, int | bool | list | tuple)
    }
    body = {
        HEARTBEAT_FINISHED_FIELD: finished.astimezone(UTC).isoformat(),
        "source": source,
        # Whether the run stopped before its end (a signal, a failing service); never why.
        "stopped": summary.get("stopped") is not None,
        **({HEARTBEAT_TABLE_FIELD: table} if table is not None else {}),
    }
    return json.dumps({**counts, **body}, sort_keys=True).encode()


def write_heartbeat(
    container: ContainerClient,
    summary: Mapping[str, Any],
    *,
    source: str,
    finished: datetime | None = None,
    table: str | None = None,
) -> bool:
    """Record that a run finished; False (and a warning) when the write failed.

    A failed heartbeat never fails the sweep: the sweep's own result is what matters to its
    caller, and a missing heartbeat is exactly what `safetynet verify` reports.
    """
    blob = container.get_blob_client(HEARTBEAT_BLOB)
    data = heartbeat_body(summary, source, finished or datetime.now(UTC), table)
    try:
        try:
            etag = blob.get_blob_properties().etag
        except ResourceNotFoundError:
            blob.upload_blob(data, overwrite=False, match_condition=MatchConditions.IfMissing)
        else:
            blob.upload_blob(
                data, overwrite=True, etag=etag, match_condition=MatchConditions.IfNotModified
            )
    except HttpResponseError as error:
        if error.status_code in LOST_RACE_STATUSES:
            return True
        log.warning("sweeper heartbeat not written: HTTP %s", error.status_code)
        return False
    except AzureError as error:
        log.warning("sweeper heartbeat not written: %s", type(error).__name__)
        return False
    return True
