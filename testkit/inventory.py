"""Blob Inventory runs written as Azure writes them, from a real (Azurite) container.

Azurite has no Blob Inventory. This lists the container with its tags, as the service's run
does, and writes the report into a destination container in the documented layout
(https://learn.microsoft.com/azure/storage/blobs/blob-inventory#inventory-output):
`YYYY/MM/DD/HH-MM-SS/<rule>/` with Parquet files in no particular order (shuffled, split, one
blob repeated: the page warns of both), `<rule>-manifest.json` shaped as the page's sample, and
`<rule>-manifest.checksum` holding the manifest's MD5. Field names are the page's schema field
names; dates are `timestamp_millis` (UTC), as the page says Parquet reports present them.

`write_recover_run` writes a run of the recover rule: the container listed with its
soft-deleted blobs, snapshots and versions (through the recovery double, which keeps them),
with the fields that rule asks for.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from azure.storage.blob import ContainerClient

from blob_safetynet.settings.vocabulary import (
    INVENTORY_SCHEMA_FIELDS,
    RECOVER_INVENTORY_RULE,
    RECOVER_INVENTORY_SCHEMA_FIELDS,
    RECOVER_VERSION_FIELDS,
)


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
    corrupt: bool = False
    """The first report file holds bytes that are not Parquet (its size in the manifest)."""


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


def recover_schema(versions: bool) -> Any:
    """The recover rule's report columns (its schema fields, in order)."""
    import pyarrow as pa

    millis = pa.timestamp("ms", "UTC")
    types = {
        "Name": pa.string(),
        "Last-Modified": millis,
        "Etag": pa.string(),
        "Content-Length": pa.int64(),
        "Content-MD5": pa.string(),
        "BlobType": pa.string(),
        "Deleted": pa.bool_(),
        "RemainingRetentionDays": pa.int64(),
        "Snapshot": pa.string(),
        "VersionId": pa.string(),
        "IsCurrentVersion": pa.bool_(),
    }
    return pa.schema([(field, types[field]) for field in recover_fields(versions)])


def recover_fields(versions: bool) -> list[str]:
    return [*RECOVER_INVENTORY_SCHEMA_FIELDS, *(RECOVER_VERSION_FIELDS if versions else ())]


def recover_rows(container: ContainerClient, versions: bool) -> list[dict[str, Any]]:
    """One report row per blob, soft-deleted blob, snapshot and (with `versions`) version of
    `container`, listed now."""
    include = ["deleted", "snapshots", *(["versions"] if versions else [])]
    rows = []
    for item in container.list_blobs(include=include):
        md5 = item.content_settings.content_md5
        row = {
            "Name": f"{container.container_name}/{item.name}",
            "Last-Modified": item.last_modified,
            "Etag": str(item.etag).strip('"'),
            "Content-Length": item.size,
            "Content-MD5": base64.b64encode(bytes(md5)).decode() if md5 else None,
            "BlobType": "BlockBlob",
            "Deleted": bool(item.deleted),
            "RemainingRetentionDays": item.remaining_retention_days,
            "Snapshot": item.snapshot or None,
        }
        if versions:
            row["VersionId"] = item.version_id
            row["IsCurrentVersion"] = item.is_current_version
        rows.append(row)
    return rows


def parquet_bytes(rows: Sequence[Mapping[str, Any]], schema: Any = None) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    table = pa.Table.from_pylist(list(rows), schema=schema or report_schema())
    pq.write_table(table, buffer)
    return buffer.getvalue()


def write_run(
    container: ContainerClient, destination: ContainerClient, spec: RunSpec | None = None
) -> str:
    """Write one run of `container`'s blobs into `destination`; returns the run's folder."""
    spec = spec or RunSpec()
    return _write(
        container, destination, spec, inventory_rows(container), None, INVENTORY_SCHEMA_FIELDS
    )


def write_recover_run(
    container: ContainerClient,
    destination: ContainerClient,
    spec: RunSpec | None = None,
    versions: bool = False,
) -> str:
    """Write one run of the recover rule (`includeDeleted`, `includeSnapshots`, with `versions`
    `includeBlobVersions`) over `container` into `destination`; returns the run's folder."""
    spec = recover_spec(container, versions, spec)
    rows = recover_rows(container, versions)
    fields = recover_fields(versions)
    return _write(container, destination, spec, rows, recover_schema(versions), fields)


def recover_spec(
    container: ContainerClient, versions: bool, spec: RunSpec | None = None
) -> RunSpec:
    """`spec` (by default a run of the recover rule now) with the recover rule's filters unless
    it names its own."""
    spec = spec or RunSpec(rule=RECOVER_INVENTORY_RULE)
    if spec.filters is not None:
        return spec
    filters = {
        "blobTypes": ["blockBlob"],
        "includeBlobVersions": versions,
        "includeSnapshots": True,
        "includeDeleted": True,
        "prefixMatch": [container.container_name],
    }
    return replace(spec, filters=filters)


def _write(
    container: ContainerClient,
    destination: ContainerClient,
    spec: RunSpec,
    rows: list[dict[str, Any]],
    schema: Any,
    fields: Sequence[str],
) -> str:
    shuffler = random.Random(spec.seed)
    shuffler.shuffle(rows)
    if rows:
        rows.append(rows[0])
    datas = []
    for number in range(spec.files):
        data = parquet_bytes(rows[number :: spec.files], schema)
        if spec.corrupt and number == 0:
            data = b"not a parquet file " + data[: len(data) // 2]
        datas.append(data)
    distinct = len(rows) - 1 if rows else 0
    return upload_run(container, destination, spec, datas, distinct, fields)


def upload_run(
    container: ContainerClient,
    destination: ContainerClient,
    spec: RunSpec,
    datas: Sequence[bytes],
    count: int,
    fields: Sequence[str],
) -> str:
    """Upload report files `datas` (Parquet bytes, `count` objects) as one run of `spec.rule`
    over `container`, with its manifest and checksum; returns the run's folder."""
    prefix = f"{spec.started:%Y/%m/%d/%H-%M-%S}/{spec.rule}/"
    files = []
    for number, data in enumerate(datas):
        name = f"{prefix}{spec.rule}_{number}.parquet"
        destination.upload_blob(name, data, overwrite=True, max_concurrency=4)
        files.append({"blob": name, "size": len(data)})
    manifest = _manifest(container, destination, spec, files, count, fields)
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
    fields: Sequence[str],
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
            "schemaFields": list(fields),
        },
        "ruleName": spec.rule,
        "status": spec.status,
        "summary": {"objectCount": count, "totalObjectSize": 0},
        "version": "1.0",
    }
    return json.dumps(manifest, indent=2).encode()
