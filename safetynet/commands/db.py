"""`safetynet db init`: create the documents table and its index; safe to run again."""

from __future__ import annotations

import argparse
import os
import sys

from sweeper.store import DocumentStore, StoreError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("db", help="manage the documents table")
    actions = parser.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    init = actions.add_parser("init", help="create the default schema (idempotent)")
    init.add_argument(
        "--db",
        default=os.environ.get("SAFETYNET_DB_URL"),
        help="SQLAlchemy URL, e.g. sqlite:///documents.db (env SAFETYNET_DB_URL)",
    )
    init.set_defaults(handler=run_init)


def run_init(args: argparse.Namespace) -> int:
    if not args.db:
        print("safetynet db init: --db URL (or SAFETYNET_DB_URL) is required", file=sys.stderr)
        return 2
    try:
        store = DocumentStore.from_url(args.db)
        store.init_schema()
        store.check_schema()
    except StoreError as error:
        print(f"safetynet db init: {error}", file=sys.stderr)
        return 2
    print(
        f"table {store.layout.table!r} ready in {store.engine.url.render_as_string(hide_password=True)}"
    )
    return 0
