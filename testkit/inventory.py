"""Blob Inventory runs written as Azure writes them, from a real (Azurite) container.

Azurite has no Blob Inventory. This lists the container with its tags, as the service's run
does, and writes the report into a destination container in the documented layout
(https://learn.microsoft.com/azure/storage/blobs/blob-inventory#inventory-output):
`YYYY/MM/DD/HH-MM-SS/<rule>/` with Parquet files in no particular order (shuffled, split, one
blob repeated: the page warns of both), `<rule>-manifest.json` shaped as the page's sample, and
`<rule>-manifest.checksum` holding the manifest's MD5. Field names are the page's schema field
names; dates are `timestamp_millis` (UTC), as the page says Parquet reports present them.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from azure.storage.blob import ContainerClient

from blob_safetynet.settings.vocabulary import INVENTORY_SCHEMA_FIELDS


@dataclass(frozen=True)
class RunSpec:
    """How the written run looks: its time and state, and how many files it is cut into."""

    rule: str = "safetynet"
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    status: str = "Succeeded"
    checksum: bool = True
    files: int = 3
    seed: int = 25
    filters: Mapping[str, Any] | None = None


def report_schema() -> Any:
    import pyarrow as pa

    millis = pa.timestamp("ms", "UTC")
    return pa.schema(
        [
            ("Name", pa.string()),
            ("Creation-Time", millis),
            ("Last-Modified", millis),
            ("Etag", pa.string()),
            ("Content-Length", pa.int64()),
            ("BlobType", pa.string()),
            ("Tags", pa.map_(pa.string(), pa.string())),
        ]
    )


def inventory_rows(container: ContainerClient) -> list[dict[str, Any]]:
    """One report row per blob of `container`, listed now with its tags."""
    return [
        {
            "Name": f"{container.container_name}/{item.name}",
            "Creation-Time": item.creation_time,
            "Last-Modified": item.last_modified,
            "Etag": str(item.etag).strip('"'),
            "Content-Length": item.size,
            "BlobType": "BlockBlob",
            "Tags": list((item.tags or {}).items()),
        }
        for item in container.list_blobs(include=["tags"])
    ]


def parquet_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(list(rows), schema=report_schema()), buffer)
    return buffer.getvalue()


def write_run(
    container: ContainerClient, destination: ContainerClient, spec: RunSpec | None = None
) -> str:
    """Write one run of `container`'s blobs into `destination`; returns the run's folder."""
    spec = spec or RunSpec()
    rows = inventory_rows(container)
    shuffler = random.Random(spec.seed)
    shuffler.shuffle(rows)
    if rows:
        rows.append(rows[0])
    prefix = f"{spec.started:%Y/%m/%d/%H-%M-%S}/{spec.rule}/"
    files = []
    for number in range(spec.files):
        data = parquet_bytes(rows[number :: spec.files])
        name = f"{prefix}{spec.rule}_{number}.parquet"
        destination.upload_blob(name, data, overwrite=True)
        files.append({"blob": name, "size": len(data)})
    distinct = len(rows) - 1 if rows else 0
    manifest = _manifest(container, destination, spec, files, distinct)
    destination.upload_blob(f"{prefix}{spec.rule}-manifest.json", manifest, overwrite=True)
    if spec.checksum:
        digest = hashlib.md5(manifest, usedforsecurity=False).hexdigest()
        destination.upload_blob(f"{prefix}{spec.rule}-manifest.checksum", digest, overwrite=True)
    return prefix


def _manifest(
    container: ContainerClient,
    destination: ContainerClient,
    spec: RunSpec,
    files: list[dict[str, Any]],
    count: int,
) -> bytes:
    filters = spec.filters or {
        "blobTypes": ["blockBlob"],
        "includeBlobVersions": False,
        "includeSnapshots": False,
        "prefixMatch": [container.container_name],
    }
    manifest = {
        "destinationContainer": destination.container_name,
        "endpoint": destination.primary_endpoint.rsplit("/", 1)[0],
        "files": files,
        "inventoryCompletionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "inventoryStartTime": spec.started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "ruleDefinition": {
            "filters": dict(filters),
            "format": "parquet",
            "objectType": "blob",
            "schedule": "daily",
            "schemaFields": list(INVENTORY_SCHEMA_FIELDS),
        },
        "ruleName": spec.rule,
        "status": spec.status,
        "summary": {"objectCount": count, "totalObjectSize": 0},
        "version": "1.0",
    }
    return json.dumps(manifest, indent=2).encode()
