"""What `sweep` and `reconcile` both work on: the documents table and one blob container.

One place for their shared options (each with its environment variable) and for turning the
ways a target can be wrong into one precise usage message.
"""

from __future__ import annotations

import argparse
import os

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient

from safetynet.constants import DEFAULT_CONTAINER
from sweeper.clients import blob_service
from sweeper.settings import SettingsError
from sweeper.store import DocumentStore, StoreError

TARGET_ERRORS = (SettingsError, StoreError, AzureError)
"""Raised by `open_target` or by the first call on the container; `describe` words them."""


def add_target_options(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--db", default=env("SAFETYNET_DB_URL"), help="SQLAlchemy URL (env SAFETYNET_DB_URL)"
    )
    add_blob_options(parser)


def add_blob_options(parser: argparse.ArgumentParser) -> None:
    """The blob target alone (`verify` has no database): account URL or connection string."""
    env = os.environ.get
    parser.add_argument(
        "--account-url",
        default=env("SAFETYNET_ACCOUNT_URL"),
        help="https blob endpoint, DefaultAzureCredential (env SAFETYNET_ACCOUNT_URL)",
    )
    parser.add_argument(
        "--connection-string",
        default=env("SAFETYNET_CONNECTION_STRING"),
        help="Azurite only (env SAFETYNET_CONNECTION_STRING)",
    )
    parser.add_argument(
        "--container",
        default=env("SAFETYNET_CONTAINER", DEFAULT_CONTAINER),
        help=f"(env SAFETYNET_CONTAINER, default {DEFAULT_CONTAINER})",
    )


def open_target(args: argparse.Namespace) -> tuple[DocumentStore, ContainerClient]:
    """The checked table and the container client; nothing is written."""
    if not args.db:
        raise SettingsError("--db URL (or SAFETYNET_DB_URL) is required")
    if not args.container:
        raise SettingsError("--container must not be empty")
    store = DocumentStore.from_url(args.db)
    store.check_schema()
    return store, open_blob_service(args).get_container_client(args.container)


def open_blob_service(args: argparse.Namespace) -> BlobServiceClient:
    """The blob service named by `add_blob_options`; nothing is sent yet."""
    if not args.container:
        raise SettingsError("--container must not be empty")
    return blob_service(args.account_url, args.connection_string)


def describe(error: Exception, args: argparse.Namespace) -> str:
    """The usage message for one of TARGET_ERRORS."""
    if isinstance(error, ResourceNotFoundError):
        return f"container {args.container!r} does not exist"
    if isinstance(error, AzureError):
        return f"blob endpoint unusable: {type(error).__name__}: {error.message}"
    return str(error)
