"""What `sweep`, `reconcile` (and `verify`) work on: the documents table and one blob container.

One place for their shared options (each with its environment variable), for the checks that
run before anything is changed, and for turning the ways a target can fail into an exit code of
the contract and a message built from redacted parts.
"""

from __future__ import annotations

import argparse
import os

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
)
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.cli.commands.common import CommandError, UsageError
from blob_safetynet.cli.commands.db import (
    add_db_auth_option,
    add_table_options,
    open_store,
    table_layout,
)
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.protocol.clients import blob_service_client
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import SettingsError, check_container_name
from blob_safetynet.settings.redaction import printable
from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import StoreError, is_unreachable

TARGET_ERRORS = (SettingsError, StoreError, AzureError)
"""What opening a target or running on it may raise; `classify` gives each its exit code."""


def add_target_options(parser: argparse.ArgumentParser) -> None:
    db_url = appsettings.DB_URL
    parser.add_argument(
        "--db", default=os.environ.get(db_url.name), help=f"SQLAlchemy URL (env {db_url.name})"
    )
    add_db_auth_option(parser)
    add_table_options(parser)
    add_blob_options(parser)


def add_blob_options(parser: argparse.ArgumentParser) -> None:
    """The blob target alone (`verify` has no database): account URL or connection string."""
    names = appsettings
    env = os.environ
    parser.add_argument(
        "--account-url",
        default=env.get(names.ACCOUNT_URL.name),
        help="https blob endpoint of Azure (public, Government or China) or a loopback emulator, "
        f"no query string; DefaultAzureCredential (env {names.ACCOUNT_URL.name})",
    )
    parser.add_argument(
        "--connection-string",
        default=env.get(names.CONNECTION_STRING.name),
        help=f"loopback emulator (Azurite) only (env {names.CONNECTION_STRING.name})",
    )
    parser.add_argument(
        "--allow-custom-endpoint",
        action="store_const",
        const="true",
        default=names.ALLOW_CUSTOM_ENDPOINT.read(env),
        help="send credentials to a blob endpoint that is neither Azure's nor loopback, e.g. a "
        f"custom domain (env {names.ALLOW_CUSTOM_ENDPOINT.name}=true|false)",
    )
    parser.add_argument(
        "--container",
        default=names.CONTAINER.read(env),
        help=f"(env {names.CONTAINER.name}, default {DEFAULT_CONTAINER})",
    )


def open_target(
    args: argparse.Namespace, *, container_may_be_gone: bool = False
) -> tuple[DocumentStore, ContainerClient]:
    """The checked table and the container, both read once; nothing is created or written.
    With `container_may_be_gone` (recover: a deleted container may be kept by container soft
    delete, and the plan names it) a missing container is not an error.
    The table's engine is disposed when the command returns (`args.resources`, which `main`
    closes), so no connection is left for the process's exit to drop.

    Raises CommandError: USAGE for a wrong option or target, INCOMPLETE when a service cannot be
    reached or refuses the credentials.
    """
    try:
        if not args.db:
            raise SettingsError(f"--db URL (or {appsettings.DB_URL.name}) is required")
        # Every option is checked before the first connection to either service.
        service = open_blob_service_client(args)
        store = open_store(args.db, args.db_auth, creating=False, layout=table_layout(args))
        args.resources.callback(store.engine.dispose)
        store.check_schema()
        container = service.get_container_client(args.container)
        if container_may_be_gone:
            container.exists()
        else:
            container.get_container_properties()
    except TARGET_ERRORS as error:
        raise classify(error, args, started=False) from None
    return store, container


def open_blob_service_client(args: argparse.Namespace) -> BlobServiceClient:
    """The blob service named by `add_blob_options`, its endpoint checked; nothing is sent yet."""
    check_container_name(args.container, "--container")
    allow_custom = appsettings.ALLOW_CUSTOM_ENDPOINT.boolean(args.allow_custom_endpoint)
    return blob_service_client(
        args.account_url, args.connection_string, allow_custom_endpoint=allow_custom
    )


def classify(error: Exception, args: argparse.Namespace, *, started: bool) -> CommandError:
    """The exit code and message for one of TARGET_ERRORS, raised before or after work began."""
    if isinstance(error, SettingsError):
        return UsageError(str(error))
    if isinstance(error, ResourceNotFoundError) and not started:
        return UsageError(f"container '{printable(args.container)}' does not exist")
    if isinstance(error, StoreError):
        unreachable = is_unreachable(error)
        if started:
            return CommandError(ExitCode.SERVICE_FAILED, f"database failed mid-run: {error}")
        return (
            CommandError(ExitCode.INCOMPLETE, str(error)) if unreachable else UsageError(str(error))
        )
    assert isinstance(error, AzureError)
    reason = f"{type(error).__name__}: {_first_line(error)}"
    if started:
        return CommandError(ExitCode.SERVICE_FAILED, f"blob service failed mid-run: {reason}")
    refused = isinstance(error, ClientAuthenticationError) or (
        isinstance(error, HttpResponseError) and error.status_code in (401, 403)
    )
    if refused or isinstance(error, ServiceRequestError):
        return CommandError(ExitCode.INCOMPLETE, f"blob endpoint unusable: {reason}")
    return UsageError(f"blob endpoint unusable: {reason}")


def _first_line(error: AzureError) -> str:
    text = str(error.message or error).strip()
    return printable(text.splitlines()[0] if text else type(error).__name__)
