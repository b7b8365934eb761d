"""A database restored to an earlier time, as the tests make one, and the lifecycle rule run by
hand.

`RestorePoint.take(store)` keeps the documents table and its two tables of the toolkit's own as
they are now; `restore()` puts them back as they were, the way a point-in-time restore does
(Azure SQL and PostgreSQL Flexible Server restore the whole database to a time T). SQLite: the
file copied with SQLite's online backup API (a consistent copy while connections stay open,
https://www.sqlite.org/backup.html). PostgreSQL: the three tables copied into tables of a
second name in the same schema; restoring empties the originals and copies the rows back, so
their constraints and indexes stay.

`run_lifecycle` deletes what the account's lifecycle rule deletes once its days have passed:
blobs tagged `state=pending` or `state=retired` (blob_safetynet/infra/storage.py), each under the tag
condition, as the service's own tag-filtered rule would; Azurite has no lifecycle management.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.settings.vocabulary import PENDING, RETIRED, STATE_TAG, tag_condition
from blob_safetynet.store.documents import DocumentStore

SNAPSHOT_PREFIX = "restore_point_"


@dataclass
class RestorePoint:
    store: DocumentStore
    copy: Path | None = None
    taken: bool = False

    def tables(self) -> list[sa.Table]:
        return [self.store.table, self.store.blobs, self.store.meta]

    def take(self) -> None:
        url = self.store.engine.url
        if url.get_backend_name() == "sqlite":
            assert self.copy is not None
            assert url.database
            with sqlite3.connect(url.database) as source, sqlite3.connect(self.copy) as target:
                source.backup(target)
        else:
            with self.store.engine.begin() as conn:
                for table in self.tables():
                    kept = self._kept(table)
                    conn.execute(sa.text(f"DROP TABLE IF EXISTS {kept}"))
                    conn.execute(sa.text(f"CREATE TABLE {kept} AS TABLE {self._name(table)}"))
        self.taken = True

    def restore(self) -> None:
        assert self.taken, "no restore point was taken"
        url = self.store.engine.url
        self.store.engine.dispose()
        if url.get_backend_name() == "sqlite":
            assert self.copy is not None
            assert url.database
            shutil.copyfile(self.copy, url.database)
            return
        with self.store.engine.begin() as conn:
            names = ", ".join(self._name(table) for table in self.tables())
            conn.execute(sa.text(f"TRUNCATE {names}"))
            for table in self.tables():
                conn.execute(
                    sa.text(f"INSERT INTO {self._name(table)} SELECT * FROM {self._kept(table)}")
                )

    def _name(self, table: sa.Table) -> str:
        return self.store.engine.dialect.identifier_preparer.format_table(table)

    def _kept(self, table: sa.Table) -> str:
        return self.store.engine.dialect.identifier_preparer.quote(SNAPSHOT_PREFIX + table.name)


def run_lifecycle(container: ContainerClient) -> list[str]:
    """Delete every blob tagged pending or retired, under its tag condition; the names deleted."""
    deleted = []
    for item in container.list_blobs(include=["tags"]):
        state = (item.tags or {}).get(STATE_TAG)
        if state not in (PENDING, RETIRED):
            continue
        try:
            container.get_blob_client(item.name).delete_blob(
                if_tags_match_condition=tag_condition(state)
            )
        except ResourceNotFoundError:
            continue
        except HttpResponseError as error:
            if error.status_code != 412:
                raise
            continue
        deleted.append(item.name)
    return deleted
