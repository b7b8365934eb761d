"""`safetynet db init` and `db upgrade`: create the tables, or bring an older schema up to date.

The only commands that create anything in a database. `init` refuses targets where "ready"
would be a lie (in-memory SQLite) or land somewhere unintended (PostgreSQL without a database
name); `upgrade` needs a database that exists (it never creates a SQLite file).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable

from blob_safetynet.cli.commands.common import fail
from blob_safetynet.cli.commands.interrupt import EXIT_CODES
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.startup import Terminated, received_signal
from blob_safetynet.protocol.clients import database_credential
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import (
    DB_AUTH_ENTRA,
    DB_AUTH_MODES,
    DB_AUTH_PASSWORD,
    DB_AUTH_SETTING,
    SettingsError,
    check_database_url,
    parse_db_auth,
)
from blob_safetynet.settings.redaction import display_db_url
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import StoreError, is_unreachable
from blob_safetynet.store.tables import DocumentTable


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("db", help="manage the documents table")
    actions = parser.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    init = actions.add_parser("init", help="create the default schema (idempotent)")
    upgrade = actions.add_parser(
        "upgrade",
        help="add what an older schema lacks (claim and content columns, the crash-window "
        "and identity tables, on PostgreSQL the blob-name index the inventory join reads, "
        "built concurrently); changes nothing that exists",
    )
    for action, handler in ((init, run_init), (upgrade, run_upgrade)):
        action.add_argument(
            "--db",
            default=os.environ.get(appsettings.DB_URL.name),
            help=f"SQLAlchemy URL, e.g. sqlite:///documents.db (env {appsettings.DB_URL.name})",
        )
        add_db_auth_option(action)
        add_table_options(action)
        action.add_argument(
            "--json", action="store_true", help="print one JSON object, also on errors"
        )
        action.set_defaults(handler=handler)


def add_db_auth_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db-auth",
        default=appsettings.DB_AUTH.read(os.environ),
        help=f"{' or '.join(DB_AUTH_MODES)}: {DB_AUTH_ENTRA} sends a Microsoft Entra token "
        "(DefaultAzureCredential) as the PostgreSQL password; the URL then has none "
        f"(env {DB_AUTH_SETTING}, default {DB_AUTH_PASSWORD})",
    )


def add_table_options(parser: argparse.ArgumentParser) -> None:
    """--table and --columns: the names an application gave its documents table."""
    table, columns = appsettings.TABLE, appsettings.COLUMNS
    parser.add_argument(
        "--table",
        default=table.read(os.environ),
        help=f"the documents table, name or schema.name (env {table.name}, default {table.default})",
    )
    parser.add_argument(
        "--columns",
        default=columns.read(os.environ),
        metavar="KEY=COLUMN,...",
        help="column names that differ from the defaults, keys "
        f"{', '.join(appsettings.COLUMN_KEYS)} (env {columns.name})",
    )


def table_layout(args: argparse.Namespace) -> DocumentTable:
    """The layout --table and --columns name; a SettingsError naming the option if malformed."""
    names = appsettings.table_names(
        args.table,
        args.columns,
        table_name=f"--table ({appsettings.TABLE.name})",
        columns_name=f"--columns ({appsettings.COLUMNS.name})",
    )
    return DocumentTable.from_names(names)


def open_store(
    url: str,
    db_auth: str,
    *,
    creating: bool,
    layout: DocumentTable | None = None,
    setting: str = "--db",
) -> DocumentStore:
    """The store for `url`, its options checked before any credential or connection."""
    auth = parse_db_auth(db_auth, f"--db-auth ({DB_AUTH_SETTING})")
    check_database_url(url, creating=creating, setting=setting, entra=auth == DB_AUTH_ENTRA)
    return DocumentStore.from_url(url, layout, token_credential=database_credential(auth))


def _open(args: argparse.Namespace, command: str, creating: bool) -> DocumentStore | int:
    """The store for --db, or the exit code after reporting why it cannot be used."""
    if not args.db:
        message = f"--db URL (or {appsettings.DB_URL.name}) is required"
        return fail(command, ExitCode.USAGE, message, args.json)
    try:
        return open_store(args.db, args.db_auth, creating=creating, layout=table_layout(args))
    except (SettingsError, StoreError) as error:
        return fail(command, ExitCode.USAGE, str(error), args.json)


def _run(
    args: argparse.Namespace, command: str, creating: bool, work: Callable[[DocumentStore], str]
) -> int:
    store = _open(args, command, creating)
    if isinstance(store, int):
        return store
    try:
        done = work(store)
    except StoreError as error:
        code = ExitCode.INCOMPLETE if is_unreachable(error) else ExitCode.USAGE
        return fail(command, code, str(error), args.json)
    finally:
        store.engine.dispose()
    if args.json:
        print(json.dumps({"database": display_db_url(args.db), "result": done}))
    else:
        print(done)
    return ExitCode.OK


def run_init(args: argparse.Namespace) -> int:
    def init(store: DocumentStore) -> str:
        store.init_schema()
        store.check_schema()
        where = display_db_url(args.db)
        return f"table {store.layout.qualified_name!r} ready in {where} (database id {store.database_id()})"

    return _run(args, "db init", True, init)


def run_upgrade(args: argparse.Namespace) -> int:
    def upgrade(store: DocumentStore) -> str:
        changes = store.upgrade_schema()
        store.check_schema()
        if not changes:
            return (
                f"table {store.layout.qualified_name!r} in {display_db_url(args.db)} is up to date"
            )
        return "\n".join(f"added {change}" for change in changes)

    try:
        return _run(args, "db upgrade", False, upgrade)
    except (KeyboardInterrupt, Terminated) as stop:
        received = received_signal(stop)
        return fail(
            "db upgrade",
            EXIT_CODES[received],
            f"stopped by {received.name}; the columns and tables are added in one transaction "
            "and an index built concurrently is left invalid when stopped: run `safetynet db "
            "upgrade` again, it finishes what is left",
            args.json,
        )
