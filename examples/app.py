"""A small document store on the upload protocol: put, get, replace, delete and list files.

    python examples/app.py put invoices/2026-11.pdf invoice.pdf
    python examples/app.py get invoices/2026-11.pdf copy.pdf
    python examples/app.py replace invoices/2026-11.pdf invoice-v2.pdf
    python examples/app.py delete invoices/2026-11.pdf
    python examples/app.py list

It reads the same settings as `safetynet sweep`: SAFETYNET_DB_URL, and SAFETYNET_ACCOUNT_URL
(Azure, DefaultAzureCredential) or SAFETYNET_CONNECTION_STRING (Azurite: `safetynet local`),
SAFETYNET_CONTAINER (default `documents`). The table comes from `safetynet db init`; the
container must exist. Exit 0 done, 1 no such document, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from azure.core.exceptions import AzureError

from blob_safetynet.protocol import (
    Document,
    DocumentStore,
    NameConflictError,
    ProtocolError,
    SettingsError,
    Status,
    StoreError,
    UploadProtocol,
    blob_service_client,
)
from blob_safetynet.settings import appsettings


def open_protocol(env: Mapping[str, str]) -> UploadProtocol:
    """The protocol on the table and container the environment names, both checked."""
    db_url = env.get(appsettings.DB_URL.name)
    if not db_url:
        raise SettingsError(f"{appsettings.DB_URL.name} is not set")
    service = blob_service_client(
        env.get(appsettings.ACCOUNT_URL.name),
        env.get(appsettings.CONNECTION_STRING.name),
        names=(appsettings.ACCOUNT_URL.name, appsettings.CONNECTION_STRING.name),
    )
    store = DocumentStore.from_url(db_url)
    store.check_schema()
    return UploadProtocol(store, service.get_container_client(appsettings.CONTAINER.read(env)))


def put(protocol: UploadProtocol, name: str, source: Path) -> str:
    with source.open("rb") as stream:
        document = protocol.put(name, stream, source.suffix, length=source.stat().st_size)
    return f"stored {name} as {document.blob_name}"


def get(protocol: UploadProtocol, name: str, target: Path) -> str:
    target.write_bytes(protocol.read(name))
    return f"wrote {target}"


def replace(protocol: UploadProtocol, name: str, source: Path) -> str:
    document = _ready(protocol, name)
    with source.open("rb") as stream:
        replaced = protocol.replace(document.id, stream, source.suffix, source.stat().st_size)
    return f"replaced {name}: now {replaced.blob_name}, {document.blob_name} retired"


def delete(protocol: UploadProtocol, name: str) -> str:
    protocol.delete(_ready(protocol, name).id)
    return f"deleted {name}"


def listing(protocol: UploadProtocol) -> str:
    documents = sorted(protocol.store.all(), key=lambda d: d.name)
    return "\n".join(f"{d.name}\t{d.status}\t{d.blob_name}" for d in documents)


def _ready(protocol: UploadProtocol, name: str) -> Document:
    document = protocol.store.get_by_name(name)
    if document is None or document.status is not Status.READY:
        raise ProtocolError(f"no ready document named {name!r}")
    return document


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="app.py", description=__doc__.splitlines()[0])
    actions = root.add_subparsers(dest="action", required=True)
    for action in ("put", "replace"):
        sub = actions.add_parser(action)
        sub.add_argument("name")
        sub.add_argument("file", type=Path)
    getter = actions.add_parser("get")
    getter.add_argument("name")
    getter.add_argument("file", type=Path)
    actions.add_parser("delete").add_argument("name")
    actions.add_parser("list")
    return root


def run(args: argparse.Namespace, protocol: UploadProtocol) -> str:
    if args.action == "put":
        return put(protocol, args.name, args.file)
    if args.action == "get":
        return get(protocol, args.name, args.file)
    if args.action == "replace":
        return replace(protocol, args.name, args.file)
    if args.action == "delete":
        return delete(protocol, args.name)
    return listing(protocol)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        protocol = open_protocol(os.environ)
        print(run(args, protocol))
    except (SettingsError, StoreError, NameConflictError, OSError) as error:
        print(f"app.py: {error}", file=sys.stderr)
        return 2
    except ProtocolError as error:
        print(f"app.py: {error}", file=sys.stderr)
        return 1
    except AzureError as error:
        print(f"app.py: blob service: {type(error).__name__}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
