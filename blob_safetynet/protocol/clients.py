"""Blob clients built once per process: DefaultAzureCredential for Azure, a connection string
only for the local emulator."""

from __future__ import annotations

import os

from azure.core.credentials import TokenCredential
from azure.storage.blob import BlobServiceClient, ExponentialRetry

from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import DB_AUTH_ENTRA, SettingsError, check_blob_endpoint

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


def blob_service_client(
    account_url: str | None = None,
    connection_string: str | None = None,
    *,
    allow_custom_endpoint: bool = False,
    names: tuple[str, str] = ("--account-url", "--connection-string"),
) -> BlobServiceClient:
    """A client for the one target given; the endpoint rule (`check_blob_endpoint`) applies.

    `names` are what the caller calls the two targets (options, or the Function's settings).
    """
    url_name, string_name = names
    if bool(account_url) == bool(connection_string):
        raise SettingsError(f"give exactly one of {url_name} (Azure) or {string_name} (Azurite)")
    if connection_string:
        try:
            service = BlobServiceClient.from_connection_string(
                connection_string,
                retry_policy=retry_policy(),
                connection_timeout=CONNECTION_TIMEOUT_S,
                read_timeout=READ_TIMEOUT_S,
            )
        except (ValueError, TypeError):
            # The SDK's words may quote the string, which holds the key: never repeat them.
            raise SettingsError(
                f"{string_name} is malformed; expected "
                "DefaultEndpointsProtocol=<http|https>;AccountName=<name>;AccountKey=<key>;"
                "BlobEndpoint=<url>"
            ) from None
        check_blob_endpoint(
            service.url,
            with_key=True,
            allow_custom=allow_custom_endpoint,
            setting=f"{string_name} endpoint",
        )
        return service
    assert account_url is not None
    check_blob_endpoint(
        account_url, with_key=False, allow_custom=allow_custom_endpoint, setting=url_name
    )
    return BlobServiceClient(
        account_url,
        credential=default_azure_credential(),
        retry_policy=retry_policy(),
        connection_timeout=CONNECTION_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
    )


def database_credential(db_auth: str) -> TokenCredential | None:
    """What the store asks for database tokens: DefaultAzureCredential for `entra`, else None.

    On Azure it picks the user-assigned identity named by AZURE_CLIENT_ID, the identity made a
    database principal; locally the developer's `az login`. Nothing is fetched until a connection.
    """
    if db_auth != DB_AUTH_ENTRA:
        return None
    return default_azure_credential()


def default_azure_credential() -> TokenCredential:
    """DefaultAzureCredential; a malformed credential variable (AZURE_TOKEN_CREDENTIALS, ...) is
    a SettingsError naming it, raised before anything is sent."""
    from azure.identity import DefaultAzureCredential  # heavy import, only for Azure targets

    return appsettings.from_credential_environment(DefaultAzureCredential, os.environ)
