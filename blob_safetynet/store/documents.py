"""The documents table: SQLAlchemy Core over any SQLAlchemy URL, with names the application owns.

Every state change is a single conditional statement (`... WHERE status = 'Pending'`), so two
actors racing on one row can never both win, and a retry of a finished step changes nothing.
Beside the documents table live two small tables of the toolkit's own: the blobs a replace or
delete leaves behind (so the sweeper finds every crash window by an indexed query) and the
database's identity (so a container can be bound to the database it belongs to).

Over 500 lines on purpose: this is the one class `DocumentStore`, each method one conditional
statement on the same three tables; the claims the sweeper takes and the steps the protocol
makes are read together to check that no two race. Its layout and records are in `tables`, its
connection in `engine`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime

import sqlalchemy as sa
from azure.core.credentials import TokenCredential
from sqlalchemy.engine import Connection, Engine

from blob_safetynet.settings.redaction import display_db_url
from blob_safetynet.store.engine import StoreError, create_engine
from blob_safetynet.store.tables import (
    CONTAINER_KEY,
    DATABASE_ID_KEY,
    BlobRecord,
    BlobRecordKind,
    Content,
    Document,
    DocumentTable,
    Status,
    new_document_id,
)


class NameConflictError(RuntimeError):
    """Another document already holds this name; the unique constraint decided, not a lookup."""

    def __init__(self, name: str) -> None:
        super().__init__(f"a document named {name!r} already exists or is being uploaded")
        self.name = name


class IndexState(enum.Enum):
    VALID = "valid"
    INVALID = "invalid"
    """Left by an interrupted concurrent build: kept up to date but never used by a query."""
    MISSING = "missing"


class SwitchResult(enum.Enum):
    SWITCHED = "switched"
    ROW_CHANGED = "row changed"
    """The row no longer points at the old blob (a concurrent replace or delete won)."""
    INTENT_LOST = "intent lost"
    """The sweeper claimed the new blob's intent: the replace was judged abandoned."""


def to_utc(value: datetime) -> datetime:
    """Aware UTC for the database. SQLite stores the wall-clock digits and drops the offset, so
    an aware local time written as-is reads back hours off; a naive value is local time."""
    return value.astimezone(UTC)


def _utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; every timestamp this module writes is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class DocumentStore:
    """Conditional operations on the documents table. One instance per process, passed in."""

    def __init__(self, engine: Engine, layout: DocumentTable | None = None) -> None:
        self.engine = engine
        self.layout = layout or DocumentTable()
        metadata = sa.MetaData()
        self.table = self.layout.build(metadata)
        self.blobs = self.layout.build_blobs(metadata)
        self.meta = self.layout.build_meta(metadata)
        self._reserve_statement = self._build_reserve()
        self._publish_statements = {
            with_blob: self._build_publish(with_blob) for with_blob in (False, True)
        }

    @classmethod
    def from_url(
        cls,
        url: str,
        layout: DocumentTable | None = None,
        token_credential: TokenCredential | None = None,
        pool_size: int | None = None,
    ) -> DocumentStore:
        """`pool_size`: the most threads sharing this store at once (`create_engine`)."""
        return cls(create_engine(url, token_credential, pool_size), layout)

    def _server_now(self) -> sa.ColumnElement[datetime]:
        """The database server's current UTC time, as SQL: the one clock every timestamp that
        decides staleness comes from, whatever the clocks of the writers say.

        SQLite's `'now'` is UTC; its text is padded to the microseconds SQLAlchemy writes, so
        stored values compare as text in the right order.
        """
        if self.engine.dialect.name == "sqlite":
            text = sa.func.strftime("%Y-%m-%d %H:%M:%f", "now").concat("000")
            return sa.type_coerce(text, sa.DateTime(timezone=True))
        return sa.func.now()

    def now(self) -> datetime:
        """The database server's clock, read now (a sweeper's default clock)."""
        with self._connect() as conn:
            value = conn.execute(sa.select(self._server_now())).scalar_one()
        return _utc(value)

    @property
    def supports_skip_locked(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @contextmanager
    def _connect(self, *, one_statement: bool = False) -> Iterator[Connection]:
        """A transaction, committed at the end; with `one_statement`, a connection whose every
        statement commits by itself: a single statement is a transaction of its own either way
        (https://www.postgresql.org/docs/current/tutorial-transactions.html, "every SQL
        statement [is] executed within a transaction"), and without BEGIN and COMMIT it is one
        round trip to the server instead of three."""
        try:
            if one_statement:
                with self.engine.connect() as conn:
                    yield conn.execution_options(isolation_level="AUTOCOMMIT")
                return
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.IntegrityError:
            raise
        except sa.exc.DBAPIError as error:
            # Every driver error (operational, programming, internal, data, a session killed by
            # idle_in_transaction_session_timeout, ...) becomes one error type callers handle.
            raise StoreError(self._describe(error)) from error
        except sa.exc.SQLAlchemyError as error:
            raise StoreError(f"{self._where()}: {error}") from error

    def _where(self) -> str:
        """The database as messages may show it: scheme, host, port and name only."""
        return f"database {display_db_url(self.engine.url.render_as_string(hide_password=False))}"

    def _describe(self, error: sa.exc.DBAPIError) -> str:
        reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
        return f"{self._where()}: {reason}"

    # Schema: create, check, upgrade.

    def init_schema(self) -> None:
        """Create the tables and their indexes if missing; running it twice is harmless.

        An existing documents table that lacks a column is refused before anything is created:
        `db init` would otherwise leave new tables beside a table it then calls unusable."""
        exists, missing = self._missing()
        if exists:
            self._check_original_columns()
            upgrade = [item for item in missing if item.startswith("column ")]
            if upgrade:
                raise StoreError(
                    f"table {self.layout.table!r} predates this version (missing "
                    f"{', '.join(upgrade)}); run `safetynet db upgrade --db URL`; nothing was "
                    "changed"
                )
        with self._connect() as conn:
            self.table.metadata.create_all(conn, checkfirst=True)
            self._ensure_database_id(conn)

    def _ensure_database_id(self, conn: Connection) -> None:
        if conn.execute(
            sa.select(self.meta.c.value).where(self.meta.c.key == DATABASE_ID_KEY)
        ).first():
            return
        conn.execute(self.meta.insert().values(key=DATABASE_ID_KEY, value=new_document_id()))

    def database_id(self) -> str:
        """This database's identity, written once by `db init` or `db upgrade`."""
        with self._connect() as conn:
            value = conn.execute(
                sa.select(self.meta.c.value).where(self.meta.c.key == DATABASE_ID_KEY)
            ).scalar_one_or_none()
        if value is None:
            raise StoreError(f"{self._where()} has no identity; run `safetynet db upgrade`")
        return str(value)

    def _meta_value(self, key: str) -> str | None:
        with self._connect() as conn:
            value = conn.execute(
                sa.select(self.meta.c.value).where(self.meta.c.key == key)
            ).scalar_one_or_none()
        return None if value is None else str(value)

    def bound_container(self) -> str | None:
        """The container (`account/container`) the first sweep bound this database to."""
        return self._meta_value(CONTAINER_KEY)

    def bind_container(self, identity: str) -> str:
        """Bind this database to `identity` unless it is bound already; the one it is bound to."""
        try:
            with self._connect() as conn:
                conn.execute(self.meta.insert().values(key=CONTAINER_KEY, value=identity))
        except sa.exc.IntegrityError:
            pass  # bound already, perhaps by a sweep racing this one: the stored value decides
        return self.bound_container() or identity

    def unbind_container(self, identity: str) -> bool:
        """Forget the binding to `identity` (only that one); True when it was recorded."""
        m = self.meta.c
        with self._connect() as conn:
            removed = conn.execute(
                self.meta.delete().where(m.key == CONTAINER_KEY, m.value == identity)
            ).rowcount
        return removed == 1

    def sample_blobs(self, limit: int) -> list[tuple[str, bool]]:
        """Up to `limit` blob names the newest rows and records name, each with whether a
        Ready row names it (its blob must exist): the evidence a first sweep checks."""
        c, b = self.table.c, self.blobs.c
        with self._connect() as conn:
            rows = conn.execute(
                sa.select(c.blob_name, c.status).order_by(c.created.desc(), c.id).limit(limit)
            ).all()
            records = conn.execute(
                sa.select(b.blob_name).order_by(b.recorded_utc.desc(), b.blob_name).limit(limit)
            ).all()
        named = [(str(r[0]), r[1] == Status.READY.value) for r in rows]
        return named + [(str(r[0]), False) for r in records]

    def _missing(self) -> tuple[bool, list[str]]:
        """(documents table present, what `db upgrade` would add)."""
        with self._connect() as conn:
            inspector = sa.inspect(conn)
            schema = self.layout.schema
            if not inspector.has_table(self.layout.table, schema=schema):
                return False, []
            present = {c["name"] for c in inspector.get_columns(self.layout.table, schema)}
            missing = [
                f"column {c.name}" for c in self.layout.added_columns() if c.name not in present
            ]
            missing += [
                f"table {t.name}"
                for t in (self.blobs, self.meta)
                if not inspector.has_table(t.name, schema=schema)
            ]
        return True, missing

    def check_schema(self) -> None:
        """Fail with a precise message when a table or one of its columns is missing."""
        self._check_original_columns()
        _, upgrade = self._missing()
        if upgrade:
            raise StoreError(
                f"table {self.layout.table!r} predates this version (missing "
                f"{', '.join(upgrade)}); run `safetynet db upgrade --db URL`"
            )

    def _check_original_columns(self) -> None:
        """The documents table exists and has every column of the first release (the ones no
        upgrade adds: they hold the application's data); a StoreError naming what is not."""
        with self._connect() as conn:
            inspector = sa.inspect(conn)
            if not inspector.has_table(self.layout.table, schema=self.layout.schema):
                raise StoreError(
                    f"table {self.layout.table!r} does not exist in {self._where()}; "
                    "create it with `safetynet db init --db URL`"
                )
            present = {
                c["name"] for c in inspector.get_columns(self.layout.table, self.layout.schema)
            }
        added = {c.name for c in self.layout.added_columns()}
        missing = [c.name for c in self.table.columns if c.name not in present | added]
        if missing:
            raise StoreError(
                f"table {self.layout.table!r} lacks column(s): {', '.join(missing)} (name them "
                "with --columns if they exist under other names); nothing was changed"
            )

    def upgrade_schema(self) -> list[str]:
        """Add what older versions lack (columns, tables, identity, the byte-order index on
        PostgreSQL); the changes made, in order.

        Everything is checked before the first change: a table lacking a column no upgrade adds
        is refused with nothing changed, and the columns and tables are added in one
        transaction. The index comes after it, built with `CREATE INDEX CONCURRENTLY`, so the
        application's writes go on meanwhile; an interrupted build leaves it invalid, and the
        next upgrade drops and builds it again."""
        exists, missing = self._missing()
        if not exists:
            raise StoreError(
                f"table {self.layout.table!r} does not exist; create it with `safetynet db init`"
            )
        self._check_original_columns()
        preparer = self.engine.dialect.identifier_preparer
        table = preparer.format_table(self.table)
        with self._connect() as conn:
            for column in self.layout.added_columns():
                if f"column {column.name}" not in missing:
                    continue
                kind = column.type.compile(dialect=self.engine.dialect)
                conn.execute(
                    sa.text(f"ALTER TABLE {table} ADD COLUMN {preparer.quote(column.name)} {kind}")
                )
            self.table.metadata.create_all(conn, tables=[self.blobs, self.meta], checkfirst=True)
            self._ensure_database_id(conn)
        return missing + self._upgrade_indexes()

    def _upgrade_indexes(self) -> list[str]:
        """Build the byte-order index on PostgreSQL if it is missing or an interrupted build
        left it invalid, without blocking the table's writers. An invalid one is dropped and
        built again, PostgreSQL's own advice for a failed `CREATE INDEX CONCURRENTLY`
        (https://www.postgresql.org/docs/current/sql-createindex.html#SQL-CREATEINDEX-CONCURRENTLY:
        it "will fail but leave behind an 'invalid' index"; "drop the index and try again")."""
        state = self.byte_order_index_state()
        if state in (None, IndexState.VALID):
            return []
        name = self.layout.byte_order_index_name
        if state is IndexState.INVALID:
            self._refuse_if_building(name)
            self._run_concurrently(f"DROP INDEX CONCURRENTLY IF EXISTS {self._index_ref()}")
        index = self.layout.byte_order_index(self.layout.build(sa.MetaData()), concurrently=True)
        create = sa.schema.CreateIndex(index).compile(dialect=self.engine.dialect)
        self._run_concurrently(str(create))
        if state is IndexState.INVALID:
            return [f"index {name} (rebuilt: an interrupted build had left it invalid)"]
        return [f"index {name}"]

    def _index_ref(self) -> str:
        preparer = self.engine.dialect.identifier_preparer
        name = preparer.quote(self.layout.byte_order_index_name)
        schema = self.layout.schema
        return f"{preparer.quote_schema(schema)}.{name}" if schema else name

    def byte_order_index_state(self) -> IndexState | None:
        """Whether the inventory join's index is there (PostgreSQL; None on other databases):
        one catalog query. An interrupted `CREATE INDEX CONCURRENTLY` leaves it INVALID
        (`pg_index.indisvalid`), unused by queries until rebuilt."""
        if self.engine.dialect.name != "postgresql":
            return None
        with self._connect(one_statement=True) as conn:
            valid = conn.execute(
                sa.text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"),
                {"name": self._index_ref()},
            ).scalar_one_or_none()
        if valid is None:
            return IndexState.MISSING
        return IndexState.VALID if valid else IndexState.INVALID

    def _refuse_if_building(self, name: str) -> None:
        """An invalid index may be another session's build still running (a client killed
        with SIGKILL leaves its server process building): dropping it would wait for that."""
        with self._connect(one_statement=True) as conn:
            pid = conn.execute(
                sa.text(
                    "SELECT pid FROM pg_stat_progress_create_index "
                    "WHERE index_relid = to_regclass(:name) LIMIT 1"
                ),
                {"name": self._index_ref()},
            ).scalar_one_or_none()
        if pid is not None:
            raise StoreError(
                f"index {name} is being built by another session (server process {pid}); run "
                "`safetynet db upgrade` again once it has finished"
            )

    def _run_concurrently(self, statement: str) -> None:
        """One `... CONCURRENTLY` statement, which PostgreSQL refuses inside a transaction
        block (https://www.postgresql.org/docs/current/sql-createindex.html#SQL-CREATEINDEX-CONCURRENTLY).
        Stopped by a signal (KeyboardInterrupt or any other exception that is not an Exception),
        the statement is cancelled on the server before the signal goes on: the client closing
        its socket would not stop the build."""
        with self._connect(one_statement=True) as conn:
            pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
            try:
                conn.execute(sa.text(statement))
            except BaseException as stop:
                if not isinstance(stop, Exception):
                    self._cancel(pid)
                raise

    def _cancel(self, pid: int) -> None:
        """Cancel server process `pid` only while it still runs a concurrent build: the
        connection may be gone already and its process number reused."""
        with self._connect(one_statement=True) as conn:
            conn.execute(
                sa.text(
                    "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = :pid "
                    "AND state = 'active' AND query LIKE '% INDEX CONCURRENTLY %'"
                ),
                {"pid": pid},
            )

    # Documents.

    def _to_document(self, row: sa.Row[str, str, str, str, datetime]) -> Document:
        return Document(row[0], row[1], row[2], Status(row[3]), _utc(row[4]))

    def _select(self) -> sa.Select[str, str, str, str, datetime]:
        c = self.table.c
        return sa.select(c.id, c.name, c.blob_name, c.status, c.created)

    def _build_reserve(self) -> sa.Insert:
        """The reservation's INSERT, built once: a statement object used again is compiled
        and cache-keyed once (https://docs.sqlalchemy.org/en/20/core/connections.html#sql-
        compilation-caching), where one built per call pays both before each cache lookup."""
        c = self.table.c
        return (
            self.table.insert()
            .values(
                id=sa.bindparam("reserve_id", type_=c.id.type),
                name=sa.bindparam("reserve_name", type_=c.name.type),
                blob_name=sa.bindparam("reserve_blob_name", type_=c.blob_name.type),
                status=sa.bindparam("reserve_status", type_=c.status.type),
                created=self._server_now(),
                content_length=sa.bindparam("reserve_length", type_=c.content_length.type),
                content_sha256=sa.bindparam("reserve_sha256", type_=c.content_sha256.type),
            )
            .returning(c.created)
        )

    def reserve(self, document: Document, content: Content | None = None) -> Document:
        """Insert a Pending row created at the server's time (not `document.created_utc`: a
        writer's clock may be hours off); a retry with the same id returns the row already there.

        `content`, when the caller knows the bytes up front, is recorded in the same INSERT
        (one round trip instead of an INSERT and an UPDATE after the upload); it is ours only
        when the row is new: a retry's caller compares it with the row's own record.
        """
        parameters = {
            "reserve_id": document.id,
            "reserve_name": document.name,
            "reserve_blob_name": document.blob_name,
            "reserve_status": document.status.value,
            "reserve_length": None if content is None else content.length,
            "reserve_sha256": None if content is None else content.sha256,
        }
        try:
            with self._connect(one_statement=True) as conn:
                created = conn.execute(self._reserve_statement, parameters).scalar_one()
            return replace(document, created_utc=_utc(created))
        except sa.exc.IntegrityError:
            existing = self.get(document.id)
            if existing is not None and existing.name == document.name:
                return existing
            raise NameConflictError(document.name) from None

    def get(self, document_id: str) -> Document | None:
        with self._connect(one_statement=True) as conn:
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

    def content(self, document_id: str) -> Content | None:
        c = self.table.c
        with self._connect(one_statement=True) as conn:
            row = conn.execute(
                sa.select(c.content_length, c.content_sha256).where(c.id == document_id)
            ).first()
        if row is None or row[0] is None or row[1] is None:
            return None
        return Content(int(row[0]), str(row[1]))

    def _with_content(self) -> sa.Select[str, str, str, str, datetime, int, str]:
        c = self.table.c
        return sa.select(
            c.id, c.name, c.blob_name, c.status, c.created, c.content_length, c.content_sha256
        )

    def _to_pair(
        self, row: sa.Row[str, str, str, str, datetime, int, str]
    ) -> tuple[Document, Content | None]:
        content = None if row[5] is None or row[6] is None else Content(int(row[5]), str(row[6]))
        document = Document(row[0], row[1], row[2], Status(row[3]), _utc(row[4]))
        return document, content

    def ready_with_content(
        self, after_id: str = "", limit: int = 1000
    ) -> list[tuple[Document, Content | None]]:
        """Up to `limit` Ready rows with their recorded length and hash, in id order after
        `after_id` (keyset pages: `safetynet recover` reads the table a page at a time)."""
        c = self.table.c
        query = (
            self._with_content()
            .where(c.status == Status.READY.value, c.id > after_id)
            .order_by(c.id)
            .limit(limit)
        )
        with self._connect() as conn:
            return [self._to_pair(row) for row in conn.execute(query)]

    def ready_by_blob_name(
        self, after_name: str = "", limit: int = 1000
    ) -> list[tuple[Document, Content | None]]:
        """Up to `limit` Ready rows with their recorded content, in the byte order of their blob
        names after `after_name` (keyset pages in the order List Blobs lists names, so
        `safetynet recover` joins the two a page at a time; `COLLATE "C"` on PostgreSQL, the
        byte-order index's order; SQLite compares text as bytes already)."""
        c = self.table.c
        key: sa.ColumnElement[str] = c.blob_name
        status: sa.ColumnElement[str] = c.status
        if self.engine.dialect.name == "postgresql":
            key = sa.collate(c.blob_name, "C")
        else:
            # SQLite's planner otherwise takes the status index and sorts every Ready row for
            # each page (0.55 s a page at 100,000 rows); `status || ''` cannot use an index
            # (https://sqlite.org/optoverview.html, "Disqualifying WHERE clause terms using
            # unary-+"), so the blob name's unique index serves the range and the order.
            status = c.status.concat("")
        query = (
            self._with_content()
            .where(status == Status.READY.value, key > after_name)
            .order_by(key)
            .limit(limit)
        )
        with self._connect() as conn:
            return [self._to_pair(row) for row in conn.execute(query)]

    def get_with_content(self, document_id: str) -> tuple[Document, Content | None] | None:
        """One row and its recorded content, read in one statement (a row re-read just before
        recover acts on it)."""
        query = self._with_content().where(self.table.c.id == document_id)
        with self._connect(one_statement=True) as conn:
            row = conn.execute(query).first()
        return None if row is None else self._to_pair(row)

    def record_content(self, document_id: str, content: Content) -> Content:
        """Keep the first upload's length and hash; returns what the row holds afterwards."""
        c = self.table.c
        with self._connect() as conn:
            conn.execute(
                self.table.update()
                .where(c.id == document_id, c.content_sha256.is_(None))
                .values(content_length=content.length, content_sha256=content.sha256)
            )
        return self.content(document_id) or content

    def _build_publish(self, with_blob: bool) -> sa.Update:
        """Publish's UPDATE, built once (as `_build_reserve`), with or without the blob name
        in its condition."""
        c = self.table.c
        pending = [
            c.id == sa.bindparam("publish_id", type_=c.id.type),
            c.status == Status.PENDING.value,
        ]
        if with_blob:
            pending.append(c.blob_name == sa.bindparam("publish_blob_name", type_=c.blob_name.type))
        return (
            self.table.update()
            .where(*pending)
            .values(status=Status.READY.value, claim_token=None, claimed=None)
        )

    def publish(
        self, document_id: str, conn: Connection | None = None, blob_name: str | None = None
    ) -> bool:
        """Pending -> Ready; False when the row is not Pending (already Ready, or swept), or,
        with `blob_name`, names another blob (swept, then reserved again under the same id)."""
        statement = self._publish_statements[blob_name is not None]
        parameters = {"publish_id": document_id}
        if blob_name is not None:
            parameters["publish_blob_name"] = blob_name
        if conn is not None:
            return conn.execute(statement, parameters).rowcount == 1
        with self._connect(one_statement=True) as own:
            return own.execute(statement, parameters).rowcount == 1

    def abandon(self, document_id: str) -> bool:
        """Remove a Pending row at once (its blob already gone); False when not Pending."""
        c = self.table.c
        with self._connect() as conn:
            result = conn.execute(
                self.table.delete().where(c.id == document_id, c.status == Status.PENDING.value)
            )
        return result.rowcount == 1

    def is_referenced(self, blob_name: str) -> bool:
        """Whether a row or a crash-window record names the blob, read now (not from a list)."""
        with self._connect() as conn:
            in_rows = conn.execute(
                sa.select(self.table.c.id).where(self.table.c.blob_name == blob_name)
            ).first()
            in_records = conn.execute(
                sa.select(self.blobs.c.blob_name).where(self.blobs.c.blob_name == blob_name)
            ).first()
        return in_rows is not None or in_records is not None

    def document_for_blob(self, blob_name: str) -> Document | None:
        with self._connect() as conn:
            row = conn.execute(self._select().where(self.table.c.blob_name == blob_name)).first()
        return None if row is None else self._to_document(row)

    # Replace and delete: every blob left behind is recorded in the same transaction.

    def record_intent(self, document_id: str, blob_name: str) -> None:
        """Before a replace uploads its new blob, so a crash leaves a record the sweeper finds."""
        with self._connect() as conn:
            conn.execute(
                self.blobs.insert().values(
                    blob_name=blob_name,
                    document_id=document_id,
                    kind=BlobRecordKind.INTENT.value,
                    recorded_utc=self._server_now(),
                )
            )

    def switch_blob(
        self,
        document_id: str,
        old_blob: str,
        new_blob: str,
        content: Content | None = None,
        claim_expired: datetime | None = None,
    ) -> SwitchResult:
        """One transaction: take back the unclaimed intent, point the Ready row at `new_blob`
        only if it still points at `old_blob`, and record `old_blob` as retired.

        `claim_expired` (the roll-forward's): an intent claimed before it is taken back too, by
        the sweeper's own rule for a claim that old (its sweeper finished or died; the next
        sweep may take it, and whichever statement commits first decides)."""
        c, b = self.table.c, self.blobs.c
        unclaimed: sa.ColumnElement[bool] = b.claim_token.is_(None)
        if claim_expired is not None:
            unclaimed = sa.or_(unclaimed, b.claimed_utc < to_utc(claim_expired))
        with self._connect() as conn:
            taken = conn.execute(
                self.blobs.delete().where(
                    b.blob_name == new_blob,
                    b.kind == BlobRecordKind.INTENT.value,
                    unclaimed,
                )
            ).rowcount
            if taken != 1:
                conn.rollback()
                return SwitchResult.INTENT_LOST
            switched = conn.execute(
                self.table.update()
                .where(c.id == document_id, c.blob_name == old_blob, c.status == Status.READY.value)
                .values(
                    blob_name=new_blob,
                    content_length=content.length if content else None,
                    content_sha256=content.sha256 if content else None,
                )
            ).rowcount
            if switched != 1:
                conn.rollback()
                return SwitchResult.ROW_CHANGED
            self._record_retired(conn, document_id, old_blob)
        return SwitchResult.SWITCHED

    def retire_intent(self, blob_name: str) -> None:
        """A replace that lost its switch: its sealed new blob becomes a retired record."""
        b = self.blobs.c
        with self._connect() as conn:
            conn.execute(
                self.blobs.update()
                .where(b.blob_name == blob_name, b.kind == BlobRecordKind.INTENT.value)
                .values(kind=BlobRecordKind.RETIRED.value, recorded_utc=self._server_now())
            )

    def drop_retired_record(self, blob_name: str) -> bool:
        """Forget a retired record (the blob is live again); deletes no blob. True if dropped."""
        b = self.blobs.c
        with self._connect() as conn:
            dropped = conn.execute(
                self.blobs.delete().where(
                    b.blob_name == blob_name, b.kind == BlobRecordKind.RETIRED.value
                )
            ).rowcount
        return dropped == 1

    def delete_row(self, document_id: str, blob_name: str) -> bool:
        """Remove a row only if it still points at `blob_name`, recording the blob as retired."""
        c = self.table.c
        with self._connect() as conn:
            removed = conn.execute(
                self.table.delete().where(c.id == document_id, c.blob_name == blob_name)
            ).rowcount
            if removed != 1:
                return False
            self._record_retired(conn, document_id, blob_name)
        return True

    def _record_retired(self, conn: Connection, document_id: str, blob_name: str) -> None:
        conn.execute(
            self.blobs.insert().values(
                blob_name=blob_name,
                document_id=document_id,
                kind=BlobRecordKind.RETIRED.value,
                recorded_utc=self._server_now(),
            )
        )

    def record_orphan(self, document_id: str, blob_name: str) -> None:
        """A sealed blob whose reservation vanished before publish: retired, so the sweeper
        deletes it after the grace period; recorded once however often it is called."""
        try:
            with self._connect() as conn:
                self._record_retired(conn, document_id, blob_name)
        except sa.exc.IntegrityError:
            pass  # recorded already (a retry of the same failed publish)

    def retired_blobs_of(self, document_id: str) -> list[str]:
        """The blobs still recorded as retired for this document (until the sweeper removes
        them): what tells a retried delete that the row it finds gone was deleted."""
        b = self.blobs.c
        query = sa.select(b.blob_name).where(
            b.document_id == document_id, b.kind == BlobRecordKind.RETIRED.value
        )
        with self._connect() as conn:
            return [str(r[0]) for r in conn.execute(query.order_by(b.blob_name))]

    def records(self, kind: BlobRecordKind | None = None) -> list[BlobRecord]:
        b = self.blobs.c
        query = sa.select(b.blob_name, b.document_id, b.kind, b.recorded_utc)
        if kind is not None:
            query = query.where(b.kind == kind.value)
        with self._connect() as conn:
            return [
                BlobRecord(r[0], r[1], BlobRecordKind(r[2]), _utc(r[3]))
                for r in conn.execute(query)
            ]

    # The sweeper's side: claim in a short transaction, work on blobs outside any transaction,
    # finish with conditional statements that only touch rows this claim still holds.

    def claim_stale(
        self,
        cutoff: datetime,
        limit: int,
        token: str,
        now: datetime,
        claim_expired: datetime,
        after: Document | None = None,
    ) -> list[Document]:
        """Stamp up to `limit` stale Pending rows after `after` with `token`; those rows.

        A row is claimable when unclaimed or claimed before `claim_expired` (its sweeper died).
        On PostgreSQL the candidates are read FOR UPDATE SKIP LOCKED, so concurrent claims
        partition the rows; elsewhere the stamp's own condition decides who holds a row.
        """
        c = self.table.c
        claimable = sa.or_(c.claim_token.is_(None), c.claimed < to_utc(claim_expired))
        candidates = self._stale_query(cutoff, after).with_only_columns(c.id).limit(limit)
        candidates = candidates.where(claimable)
        if self.supports_skip_locked:
            candidates = candidates.with_for_update(skip_locked=True)
        with self._connect() as conn:
            ids = list(conn.execute(candidates).scalars())
            if not ids:
                return []
            conn.execute(
                self.table.update()
                .where(
                    c.id.in_(ids),
                    c.status == Status.PENDING.value,
                    claimable,
                )
                .values(claim_token=token, claimed=to_utc(now))
            )
            rows = conn.execute(
                self._select()
                .where(c.claim_token == token, c.id.in_(ids))
                .order_by(c.created, c.id)
            )
            return [self._to_document(r) for r in rows]

    def peek_stale(
        self, cutoff: datetime, limit: int, after: Document | None = None
    ) -> list[Document]:
        """What a claim would take, read without locking or stamping anything (dry runs)."""
        with self._connect() as conn:
            return [
                self._to_document(r)
                for r in conn.execute(self._stale_query(cutoff, after).limit(limit))
            ]

    def _stale_query(
        self, cutoff: datetime, after: Document | None
    ) -> sa.Select[str, str, str, str, datetime]:
        c = self.table.c
        query = self._select().where(c.status == Status.PENDING.value, c.created < to_utc(cutoff))
        if after is not None:
            query = query.where(
                sa.or_(
                    c.created > after.created_utc,
                    sa.and_(c.created == after.created_utc, c.id > after.id),
                )
            )
        return query.order_by(c.created, c.id)

    def finish_claim(
        self,
        token: str,
        claimed_ids: Sequence[str],
        delete_ids: Sequence[str],
        publish_ids: Sequence[str],
    ) -> tuple[int, int]:
        """(rows deleted, rows rolled forward); each statement acts only on rows still ours.

        Every statement names its rows by primary key: a condition on the claim token alone
        would scan the whole table (no index serves it)."""
        c = self.table.c
        deleted = published = 0
        with self._connect() as conn:
            if delete_ids:
                deleted = conn.execute(
                    self.table.delete().where(
                        c.id.in_(list(delete_ids)),
                        c.status == Status.PENDING.value,
                        c.claim_token == token,
                    )
                ).rowcount
            if publish_ids:
                published = conn.execute(
                    self.table.update()
                    .where(
                        c.id.in_(list(publish_ids)),
                        c.status == Status.PENDING.value,
                        c.claim_token == token,
                    )
                    .values(status=Status.READY.value, claim_token=None, claimed=None)
                ).rowcount
            # Rows this run could not finish are handed back for the next run at once.
            conn.execute(
                self.table.update()
                .where(c.id.in_(list(claimed_ids)), c.claim_token == token)
                .values(claim_token=None, claimed=None)
            )
        return deleted, published

    def claims_held(self, claim_expired: datetime, ours: str) -> tuple[int, datetime | None]:
        """Pending rows and records another run (not `ours`) holds a live claim on (a sweeper
        running now, or one that died holding them): how many, and the oldest claim's stamp."""
        c, b = self.table.c, self.blobs.c
        with self._connect() as conn:
            rows = conn.execute(
                sa.select(sa.func.count(), sa.func.min(c.claimed)).where(
                    c.status == Status.PENDING.value,
                    c.claim_token != ours,
                    c.claimed >= to_utc(claim_expired),
                )
            ).one()
            records = conn.execute(
                sa.select(sa.func.count(), sa.func.min(b.claimed_utc)).where(
                    b.claim_token != ours, b.claimed_utc >= to_utc(claim_expired)
                )
            ).one()
        stamps = [_utc(t) for t in (rows[1], records[1]) if t is not None]
        return int(rows[0]) + int(records[0]), min(stamps, default=None)

    def claim_records(
        self,
        kind: BlobRecordKind,
        recorded_before: datetime,
        limit: int,
        token: str,
        now: datetime,
        claim_expired: datetime,
        after: BlobRecord | None = None,
    ) -> list[BlobRecord]:
        """Stamp up to `limit` records of `kind` older than `recorded_before` with `token`."""
        b = self.blobs.c
        claimable = sa.or_(b.claim_token.is_(None), b.claimed_utc < to_utc(claim_expired))
        candidates = (
            self._records_query(kind, recorded_before, after)
            .with_only_columns(b.blob_name)
            .where(claimable)
            .limit(limit)
        )
        if self.supports_skip_locked:
            candidates = candidates.with_for_update(skip_locked=True)
        with self._connect() as conn:
            names = list(conn.execute(candidates).scalars())
            if not names:
                return []
            conn.execute(
                self.blobs.update()
                .where(b.blob_name.in_(names), b.kind == kind.value, claimable)
                .values(claim_token=token, claimed_utc=to_utc(now))
            )
            rows = conn.execute(
                sa.select(b.blob_name, b.document_id, b.kind, b.recorded_utc)
                .where(b.claim_token == token, b.blob_name.in_(names))
                .order_by(b.recorded_utc, b.blob_name)
            )
            return [BlobRecord(r[0], r[1], BlobRecordKind(r[2]), _utc(r[3])) for r in rows]

    def peek_records(
        self,
        kind: BlobRecordKind,
        recorded_before: datetime,
        limit: int,
        after: BlobRecord | None = None,
    ) -> list[BlobRecord]:
        """What a record claim would take, read without stamping anything (dry runs)."""
        query = self._records_query(kind, recorded_before, after).limit(limit)
        with self._connect() as conn:
            return [
                BlobRecord(r[0], r[1], BlobRecordKind(r[2]), _utc(r[3]))
                for r in conn.execute(query)
            ]

    def _records_query(
        self, kind: BlobRecordKind, recorded_before: datetime, after: BlobRecord | None
    ) -> sa.Select[str, str, str, datetime]:
        b = self.blobs.c
        query = sa.select(b.blob_name, b.document_id, b.kind, b.recorded_utc).where(
            b.kind == kind.value, b.recorded_utc < to_utc(recorded_before)
        )
        if after is not None:
            query = query.where(
                sa.or_(
                    b.recorded_utc > after.recorded_utc,
                    sa.and_(b.recorded_utc == after.recorded_utc, b.blob_name > after.blob_name),
                )
            )
        return query.order_by(b.recorded_utc, b.blob_name)

    def finish_records(self, token: str, claimed: Sequence[str], done: Sequence[str]) -> int:
        """Drop the records whose blobs are gone; hand the others back. Records dropped."""
        b = self.blobs.c
        with self._connect() as conn:
            removed = 0
            if done:
                removed = conn.execute(
                    self.blobs.delete().where(b.blob_name.in_(list(done)), b.claim_token == token)
                ).rowcount
            # Retired records go back for the next run at once. A claimed intent is never handed
            # back: the claim is what makes the stalled replace's switch fail.
            conn.execute(
                self.blobs.update()
                .where(
                    b.blob_name.in_(list(claimed)),
                    b.claim_token == token,
                    b.kind == BlobRecordKind.RETIRED.value,
                )
                .values(claim_token=None, claimed_utc=None)
            )
        return removed
