"""The documents table's layout and its records: the names an application owns (DocumentTable),
the two tables of the toolkit's own beside it, and the rows read back (Document, BlobRecord,
Content, Status)."""

from __future__ import annotations

import enum
import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from blob_safetynet.settings.appsettings import TableNames, qualified_name

DATABASE_ID_KEY = "database_id"
IDENTIFIER_BYTES = 63
"""PostgreSQL's longest identifier (NAMEDATALEN - 1 bytes); longer ones are truncated:
https://www.postgresql.org/docs/current/sql-syntax-lexical.html#SQL-SYNTAX-IDENTIFIERS"""
CONTAINER_KEY = "container"


class Status(enum.StrEnum):
    PENDING = "Pending"
    READY = "Ready"


class BlobRecordKind(enum.StrEnum):
    INTENT = "intent"
    """A replace's new blob, recorded before its upload; the switch removes the record."""
    RETIRED = "retired"
    """A blob no row references any more, deleted by the sweeper after the grace period."""


@dataclass(frozen=True)
class DocumentTable:
    """Where the documents live; every name is configurable because applications own the table."""

    table: str = "documents"
    id: str = "id"
    name: str = "name"
    blob_name: str = "blob_name"
    status: str = "status"
    created_utc: str = "created_utc"
    schema: str | None = None
    claimed_by: str = "claimed_by"
    claimed_utc: str = "claimed_utc"
    content_length: str = "content_length"
    content_sha256: str = "content_sha256"
    blobs_table: str | None = None
    """The crash-window records; `<table>_blobs` unless named."""
    meta_table: str | None = None
    """The database's identity; `<table>_meta` unless named."""

    @classmethod
    def from_names(cls, names: TableNames) -> DocumentTable:
        """The layout SAFETYNET_TABLE and SAFETYNET_COLUMNS (or the CLI's --table, --columns)
        name."""
        return cls(table=names.table, schema=names.schema, **dict(names.columns))

    @property
    def qualified_name(self) -> str:
        """`schema.table` or `table`: how commands and the heartbeat name the table."""
        return qualified_name(self.schema, self.table)

    @property
    def blobs_table_name(self) -> str:
        return self.blobs_table or f"{self.table}_blobs"

    @property
    def meta_table_name(self) -> str:
        return self.meta_table or f"{self.table}_meta"

    @property
    def byte_order_index_name(self) -> str:
        """`ix_<table>_blob_name_c`, shortened with a digest of the whole when PostgreSQL's
        identifier limit would cut it, so the same table always gets the same name."""
        return fit_identifier(f"ix_{self.table}_blob_name_c")

    def build(self, metadata: sa.MetaData) -> sa.Table:
        table = sa.Table(
            self.table,
            metadata,
            sa.Column(self.id, sa.String(36), primary_key=True, key="id"),
            sa.Column(self.name, sa.String(1024), nullable=False, unique=True, key="name"),
            sa.Column(
                self.blob_name, sa.String(1024), nullable=False, unique=True, key="blob_name"
            ),
            sa.Column(self.status, sa.String(16), nullable=False, key="status"),
            sa.Column(self.created_utc, sa.DateTime(timezone=True), nullable=False, key="created"),
            *self.added_columns(),
            # Serves the sweeper's claim: Pending rows older than the cutoff, in keyset order.
            sa.Index(f"ix_{self.table}_status_created", "status", "created", "id"),
            schema=self.schema,
        )
        self.byte_order_index(table)
        return table

    def byte_order_index(self, table: sa.Table, concurrently: bool = False) -> sa.Index:
        """PostgreSQL only: blob names in byte order (`COLLATE "C"`) with the status and the
        creation time beside them, so the inventory join reads the table in the report's order
        by an Index Only Scan instead of sorting it. SQLite compares text bytewise already
        (BINARY) and its unique index on the blob name serves that order."""
        index = sa.Index(
            self.byte_order_index_name,
            sa.collate(table.c.blob_name, "C"),
            postgresql_include=[table.c.status, table.c.created],
            postgresql_concurrently=concurrently,
        )
        index.ddl_if(dialect="postgresql")
        return index

    def added_columns(self) -> list[sa.Column[object]]:
        """Columns added after the first release; `db upgrade` adds them to older tables."""
        return [
            sa.Column(self.claimed_by, sa.String(36), nullable=True, key="claim_token"),
            sa.Column(self.claimed_utc, sa.DateTime(timezone=True), nullable=True, key="claimed"),
            sa.Column(self.content_length, sa.BigInteger, nullable=True, key="content_length"),
            sa.Column(self.content_sha256, sa.String(64), nullable=True, key="content_sha256"),
        ]

    def build_blobs(self, metadata: sa.MetaData) -> sa.Table:
        name = self.blobs_table_name
        return sa.Table(
            name,
            metadata,
            sa.Column("blob_name", sa.String(1024), primary_key=True),
            sa.Column("document_id", sa.String(36), nullable=False),
            sa.Column("kind", sa.String(16), nullable=False),
            sa.Column("recorded_utc", sa.DateTime(timezone=True), nullable=False),
            sa.Column("claimed_by", sa.String(36), nullable=True, key="claim_token"),
            sa.Column("claimed_utc", sa.DateTime(timezone=True), nullable=True),
            sa.Index(f"ix_{name}_kind_recorded", "kind", "recorded_utc", "blob_name"),
            schema=self.schema,
        )

    def build_meta(self, metadata: sa.MetaData) -> sa.Table:
        return sa.Table(
            self.meta_table_name,
            metadata,
            sa.Column("key", sa.String(64), primary_key=True),
            sa.Column("value", sa.String(256), nullable=False),
            schema=self.schema,
        )


@dataclass(frozen=True)
class Document:
    id: str
    name: str
    blob_name: str
    status: Status
    created_utc: datetime


@dataclass(frozen=True)
class BlobRecord:
    blob_name: str
    document_id: str
    kind: BlobRecordKind
    recorded_utc: datetime


@dataclass(frozen=True)
class Content:
    """What the first upload of a document held: a retry must send the same bytes."""

    length: int
    sha256: str


def fit_identifier(name: str) -> str:
    """`name`, or when it is longer than IDENTIFIER_BYTES in UTF-8 its head (whole characters)
    and the first 8 hex digits of its SHA-256: deterministic, and two long names sharing a head
    still differ."""
    encoded = name.encode()
    if len(encoded) <= IDENTIFIER_BYTES:
        return name
    digest = hashlib.sha256(encoded).hexdigest()[:8]
    head = encoded[: IDENTIFIER_BYTES - len(digest) - 1].decode(errors="ignore")
    return f"{head}_{digest}"


def new_document_id() -> str:
    return str(uuid.uuid4())
