"""The documents table: SQLAlchemy Core over any SQLAlchemy URL, with names the application owns.

Every state change is a single conditional statement (`... WHERE status = 'Pending'`), so two
actors racing on one row can never both win, and a retry of a finished step changes nothing.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

_DRIVERS = {"postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg"}
SUPPORTED_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg")


class Status(enum.StrEnum):
    PENDING = "Pending"
    READY = "Ready"


class StoreError(RuntimeError):
    """The database URL, the connection or the table is not usable."""


class NameConflictError(RuntimeError):
    """Another document already holds this name; the unique constraint decided, not a lookup."""

    def __init__(self, name: str) -> None:
        super().__init__(f"a document named {name!r} already exists or is being uploaded")
        self.name = name


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

    def build(self, metadata: sa.MetaData) -> sa.Table:
        return sa.Table(
            self.table,
            metadata,
            sa.Column(self.id, sa.String(36), primary_key=True, key="id"),
            sa.Column(self.name, sa.String(1024), nullable=False, unique=True, key="name"),
            sa.Column(
                self.blob_name, sa.String(1024), nullable=False, unique=True, key="blob_name"
            ),
            sa.Column(self.status, sa.String(16), nullable=False, key="status"),
            sa.Column(self.created_utc, sa.DateTime(timezone=True), nullable=False, key="created"),
            # Serves the sweeper's claim: Pending rows older than the cutoff, in keyset order.
            sa.Index(f"ix_{self.table}_status_created", "status", "created", "id"),
            schema=self.schema,
        )


@dataclass(frozen=True)
class Document:
    id: str
    name: str
    blob_name: str
    status: Status
    created_utc: datetime


def new_document_id() -> str:
    return str(uuid.uuid4())


def create_engine(url: str) -> Engine:
    """An engine for `url`, or a StoreError that says which schemes are supported."""
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        # The URL may carry a password: never echo it back.
        raise StoreError(
            "malformed database URL; expected scheme://[user[:password]@]host[:port]/database "
            "or sqlite:///path"
        ) from None
    backend = parsed.get_backend_name()
    if parsed.drivername in _DRIVERS:
        parsed = parsed.set(drivername=_DRIVERS[parsed.drivername])
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(
            f"unsupported database URL scheme {parsed.drivername!r}; "
            f"use one of {', '.join(SUPPORTED_SCHEMES)} (e.g. sqlite:///documents.db)"
        )
    try:
        return sa.create_engine(parsed, pool_pre_ping=True)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as error:
        safe = parsed.render_as_string(hide_password=True)
        raise StoreError(f"cannot use database URL {safe}: {error}") from None


def _utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; every timestamp this module writes is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class DocumentStore:
    """Conditional operations on the documents table. One instance per process, passed in."""

    def __init__(self, engine: Engine, layout: DocumentTable | None = None) -> None:
        self.engine = engine
        self.layout = layout or DocumentTable()
        self.table = self.layout.build(sa.MetaData())

    @classmethod
    def from_url(cls, url: str, layout: DocumentTable | None = None) -> DocumentStore:
        return cls(create_engine(url), layout)

    @property
    def supports_skip_locked(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.OperationalError as error:
            raise StoreError(self._describe(error)) from error
        except sa.exc.ProgrammingError as error:
            raise StoreError(self._describe(error)) from error

    def _describe(self, error: sa.exc.DBAPIError) -> str:
        where = self.engine.url.render_as_string(hide_password=True)
        reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
        return f"database {where}: {reason}"

    def init_schema(self) -> None:
        """Create the table and its index if missing; running it twice is harmless."""
        with self._connect() as conn:
            self.table.metadata.create_all(conn, checkfirst=True)

    def check_schema(self) -> None:
        """Fail with a precise message when the table or one of its columns is missing."""
        with self._connect() as conn:
            inspector = sa.inspect(conn)
            if not inspector.has_table(self.layout.table, schema=self.layout.schema):
                raise StoreError(
                    f"table {self.layout.table!r} does not exist in "
                    f"{self.engine.url.render_as_string(hide_password=True)}; "
                    "create it with `safetynet db init --db URL`"
                )
            present = {
                c["name"] for c in inspector.get_columns(self.layout.table, self.layout.schema)
            }
        missing = [c.name for c in self.table.columns if c.name not in present]
        if missing:
            raise StoreError(f"table {self.layout.table!r} lacks column(s): {', '.join(missing)}")

    def _to_document(self, row: sa.Row[str, str, str, str, datetime]) -> Document:
        return Document(row[0], row[1], row[2], Status(row[3]), _utc(row[4]))

    def _select(self) -> sa.Select[str, str, str, str, datetime]:
        c = self.table.c
        return sa.select(c.id, c.name, c.blob_name, c.status, c.created)

    def reserve(self, document: Document) -> Document:
        """Insert a Pending row; a retry with the same id returns the row already there."""
        try:
            with self._connect() as conn:
                conn.execute(
                    self.table.insert().values(
                        id=document.id,
                        name=document.name,
                        blob_name=document.blob_name,
                        status=document.status.value,
                        created=document.created_utc,
                    )
                )
            return document
        except sa.exc.IntegrityError:
            existing = self.get(document.id)
            if existing is not None and existing.name == document.name:
                return existing
            raise NameConflictError(document.name) from None

    def get(self, document_id: str) -> Document | None:
        with self._connect() as conn:
            row = conn.execute(self._select().where(self.table.c.id == document_id)).first()
        return None if row is None else self._to_document(row)

    def get_by_name(self, name: str) -> Document | None:
        with self._connect() as conn:
            row = conn.execute(self._select().where(self.table.c.name == name)).first()
        return None if row is None else self._to_document(row)

    def all(self) -> list[Document]:
        with self._connect() as conn:
            return [self._to_document(r) for r in conn.execute(self._select())]

    def count(self, status: Status | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(self.table)
        if status is not None:
            query = query.where(self.table.c.status == status.value)
        with self._connect() as conn:
            return int(conn.execute(query).scalar_one())

    def publish(self, document_id: str, conn: Connection | None = None) -> bool:
        """Pending -> Ready; False when the row is not Pending (already Ready, or swept)."""
        statement = (
            self.table.update()
            .where(self.table.c.id == document_id, self.table.c.status == Status.PENDING.value)
            .values(status=Status.READY.value)
        )
        if conn is not None:
            return conn.execute(statement).rowcount == 1
        with self._connect() as own:
            return own.execute(statement).rowcount == 1

    def switch_blob(self, document_id: str, old_blob: str, new_blob: str) -> bool:
        """Point a Ready row at new bytes, only if it still points at `old_blob`."""
        c = self.table.c
        with self._connect() as conn:
            result = conn.execute(
                self.table.update()
                .where(c.id == document_id, c.blob_name == old_blob, c.status == Status.READY.value)
                .values(blob_name=new_blob)
            )
        return result.rowcount == 1

    def delete_row(self, document_id: str, blob_name: str) -> bool:
        """Remove a row only if it still points at `blob_name` (a concurrent replace wins)."""
        c = self.table.c
        with self._connect() as conn:
            result = conn.execute(
                self.table.delete().where(c.id == document_id, c.blob_name == blob_name)
            )
        return result.rowcount == 1

    # The sweeper's side: claim stale rows in chunks, finish them in the same transaction.

    @contextmanager
    def claim_stale(
        self, cutoff: datetime, limit: int, after: Document | None = None
    ) -> Iterator[StaleBatch]:
        """Stale Pending rows in (created, id) order after `after`, locked where the DB can.

        On PostgreSQL the rows stay locked (FOR UPDATE SKIP LOCKED) until the block exits, so
        N sweepers partition the work; elsewhere one sweeper at a time is expected (a lease).
        Keyset paging guarantees progress past rows a run could not finish.
        """
        c = self.table.c
        query = self._select().where(c.status == Status.PENDING.value, c.created < cutoff)
        if after is not None:
            query = query.where(
                sa.or_(
                    c.created > after.created_utc,
                    sa.and_(c.created == after.created_utc, c.id > after.id),
                )
            )
        query = query.order_by(c.created, c.id).limit(limit)
        if self.supports_skip_locked:
            query = query.with_for_update(skip_locked=True)
        with self._connect() as conn:
            rows = [self._to_document(r) for r in conn.execute(query)]
            yield StaleBatch(self, conn, rows)


@dataclass
class StaleBatch:
    """Rows claimed by one sweeper, finished inside the claiming transaction."""

    store: DocumentStore
    conn: Connection
    documents: list[Document]

    def roll_forward(self, document_ids: Sequence[str]) -> int:
        """Sealed blobs prove complete bytes: their rows turn Ready instead of being deleted."""
        return sum(self.store.publish(i, self.conn) for i in document_ids)

    def delete_pending(self, document_ids: Sequence[str]) -> int:
        if not document_ids:
            return 0
        c = self.store.table.c
        result = self.conn.execute(
            self.store.table.delete().where(
                c.id.in_(list(document_ids)), c.status == Status.PENDING.value
            )
        )
        return result.rowcount
