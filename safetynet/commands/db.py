"""`safetynet db init` and `db upgrade`: create the tables, or bring an older schema up to date."""

from __future__ import annotations

import argparse
import os
import sys

from sweeper.store import DocumentStore, StoreError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("db", help="manage the documents table")
    actions = parser.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    init = actions.add_parser("init", help="create the default schema (idempotent)")
    upgrade = actions.add_parser(
        "upgrade",
        help="add what an older schema lacks (claim and content columns, the crash-window "
        "and identity tables); changes nothing that exists",
    )
    for action, handler in ((init, run_init), (upgrade, run_upgrade)):
        action.add_argument(
            "--db",
            default=os.environ.get("SAFETYNET_DB_URL"),
            help="SQLAlchemy URL, e.g. sqlite:///documents.db (env SAFETYNET_DB_URL)",
        )
        action.set_defaults(handler=handler)


def _where(store: DocumentStore) -> str:
    return store.engine.url.render_as_string(hide_password=True)


def run_init(args: argparse.Namespace) -> int:
    if not args.db:
        print("safetynet db init: --db URL (or SAFETYNET_DB_URL) is required", file=sys.stderr)
        return 2
    try:
        store = DocumentStore.from_url(args.db)
        store.init_schema()
        store.check_schema()
        database_id = store.database_id()
    except StoreError as error:
        print(f"safetynet db init: {error}", file=sys.stderr)
        return 2
    print(f"table {store.layout.table!r} ready in {_where(store)} (database id {database_id})")
    return 0


def run_upgrade(args: argparse.Namespace) -> int:
    if not args.db:
        print("safetynet db upgrade: --db URL (or SAFETYNET_DB_URL) is required", file=sys.stderr)
        return 2
    try:
        store = DocumentStore.from_url(args.db)
        changes = store.upgrade_schema()
        store.check_schema()
    except StoreError as error:
        print(f"safetynet db upgrade: {error}", file=sys.stderr)
        return 2
    if not changes:
        print(f"table {store.layout.table!r} in {_where(store)} is up to date")
    for change in changes:
        print(f"added {change}")
    return 0
