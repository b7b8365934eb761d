"""Blob clients built once per process: DefaultAzureCredential for Azure, a connection string
only for the local emulator."""

from __future__ import annotations

from urllib.parse import urlparse

from azure.storage.blob import BlobServiceClient, ExponentialRetry

from sweeper.settings import SettingsError

CONNECTION_TIMEOUT_S = 10
READ_TIMEOUT_S = 20
"""A call that hangs must not eat a timer run: the Consumption plan's function timeout defaults
to 5 minutes (https://github.com/MicrosoftDocs/azure-docs/blob/master/includes/
functions-timeout-duration.md). The SDK's 60 s read timeout over 4 attempts (azure-storage-blob
`_shared/constants.py` READ_TIMEOUT) is more than 4 minutes for one call; 20 s is about 90 s
with the back-offs, and a Blob Batch of 256 deletes answers in well under a second."""


def retry_policy() -> ExponentialRetry:
    """3 retries after about 1, 3 and 5 s: transient faults still heal, and an unreachable
    endpoint fails in seconds instead of the SDK default's 15 s, 18 s, 24 s back-offs."""
    return ExponentialRetry(initial_backoff=1, increment_base=2, retry_total=3)


def blob_service(
    account_url: str | None = None, connection_string: str | None = None
) -> BlobServiceClient:
    if bool(account_url) == bool(connection_string):
        raise SettingsError(
            "give exactly one of --account-url (Azure) or --connection-string (Azurite)"
        )
    if connection_string:
        try:
            return BlobServiceClient.from_connection_string(
                connection_string,
                retry_policy=retry_policy(),
                connection_timeout=CONNECTION_TIMEOUT_S,
                read_timeout=READ_TIMEOUT_S,
            )
        except ValueError as error:
            raise SettingsError(f"connection string is malformed: {error}") from None
    assert account_url is not None
    parsed = urlparse(account_url)
    if parsed.scheme != "https" or not parsed.netloc:
        raise SettingsError(
            f"account URL {account_url!r} must be https://<account>.blob.core.windows.net "
            "(tokens are never sent over plain HTTP)"
        )
    from azure.identity import DefaultAzureCredential  # heavy import, only for Azure targets

    return BlobServiceClient(
        account_url,
        credential=DefaultAzureCredential(),
        retry_policy=retry_policy(),
        connection_timeout=CONNECTION_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
    )
