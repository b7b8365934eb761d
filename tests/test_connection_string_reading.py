"""The project's reading of a connection string (`redaction.read_connection_string`, behind what
messages show and what the scrubber hides) is the Blob SDK's: on generated strings, the same
endpoint, account name and key, or both refuse."""

from __future__ import annotations

import pytest
from azure.storage.blob import BlobServiceClient
from azure.storage.blob._shared.base_client import parse_connection_str
from hypothesis import example, given, settings
from hypothesis import strategies as st

from blob_safetynet.settings.redaction import (
    DEVELOPMENT_ENDPOINT,
    PUBLISHED_KEY,
    Redactor,
    display_connection_string,
    read_connection_string,
    secrets_of_connection_string,
)

Reading = tuple[str, object] | None

KEY = "c2VjcmV0LWtleS1mb3ItdGhlLXRlc3Q="
KEYS = (
    "AccountName",
    "AccountKey",
    "BlobEndpoint",
    "BlobSecondaryEndpoint",
    "DefaultEndpointsProtocol",
    "EndpointSuffix",
    "UseDevelopmentStorage",
    "SharedAccessSignature",
    "QueueEndpoint",
)
VALUES = (
    "acct",
    "devstoreaccount1",
    KEY,
    "",
    "true",
    "True",
    "http",
    "https",
    "core.windows.net",
    "core.chinacloudapi.cn",
    "http://127.0.0.1:10000/devstoreaccount1",
    "https://acct.blob.core.windows.net/",
    "https://acct.blob.core.windows.net/some/path",
    "localhost:10000/devstoreaccount1",
    "HTTP://LOCALHOST:10000/x",
    "acct.blob.core.windows.net",
    "https://",
    "sv=2024-01-01&sig=abc%2Fdef",
    "a=b",
)


def _case(word: str, flips: list[bool]) -> str:
    return "".join(
        c.swapcase() if f else c for c, f in zip(word, flips + [False] * len(word), strict=False)
    )


@st.composite
def connection_strings(draw: st.DrawFn) -> str:
    """Parts from the connection-string vocabulary, in any case, order and number, with spaces,
    duplicates, stray words and trailing semicolons."""
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        key = _case(draw(st.sampled_from(KEYS)), draw(st.lists(st.booleans(), max_size=12)))
        key = draw(st.sampled_from(("", " "))) + key + draw(st.sampled_from(("", "", " ")))
        value = draw(st.sampled_from(VALUES)) + draw(st.sampled_from(("", "", " ")))
        parts.append(draw(st.sampled_from((f"{key}={value}",) * 6 + (key, ""))))
    return ";".join(parts) + draw(st.sampled_from(("", ";", ";;")))


def sdk_reading(text: str) -> Reading:
    """What the Blob SDK's own parser (`parse_connection_str`, behind
    BlobServiceClient.from_connection_string) makes of `text`: the primary endpoint and the
    credential; None when it refuses."""
    try:
        primary, _, credential = parse_connection_str(text, None, "blob")
    except ValueError:
        return None
    return primary, credential


def our_reading(text: str) -> Reading:
    """The project's reading in the SDK's shape: name and key as a dict, the emulator shortcut
    as its key alone, else the SAS (or None)."""
    reading = read_connection_string(text)
    if reading is None:
        return None
    if reading.account_key == PUBLISHED_KEY and reading.blob_endpoint == DEVELOPMENT_ENDPOINT:
        credential: object = reading.account_key
    elif reading.account_key is not None:
        credential = {"account_name": reading.account_name, "account_key": reading.account_key}
    else:
        credential = reading.sas
    return reading.blob_endpoint, credential


@settings(max_examples=400, deadline=None)
@given(connection_strings())
@example("UseDevelopmentStorage=true")
@example("usedevelopmentstorage=true;")
@example("UseDevelopmentStorage=True")
@example(f"AccountName=acct;SharedAccessSignature={KEY}")
@example(f"AccountName=acct;AccountKey={KEY};EndpointSuffix=core.chinacloudapi.cn")
@example(f"accountname=acct;ACCOUNTKEY={KEY};DefaultEndpointsProtocol=http;EndpointSuffix=x.y;")
@example(f" AccountName=acct;AccountKey={KEY}")
@example(f"AccountName=acct ;AccountKey={KEY}")
@example(f"AccountName=acct;AccountKey={KEY};BlobEndpoint=http://127.0.0.1:10000/acct;;")
@example(f"AccountName=a;AccountName=b;AccountKey={KEY}")
@example("BlobSecondaryEndpoint=https://acct-secondary.blob.core.windows.net")
@example("AccountName=acct;broken")
@example("")
def test_the_project_reads_a_connection_string_as_the_sdk_does(text: str) -> None:
    """Same endpoint (scheme, host, path), account name and key as the SDK, or both refuse."""
    assert our_reading(text) == sdk_reading(text)


@settings(max_examples=200, deadline=None)
@given(connection_strings())
def test_the_key_the_sdk_signs_with_is_hidden_and_never_shown(text: str) -> None:
    """Whatever key or SAS the SDK's parser takes from the string is among its secrets, so the
    scrubber hides it, and the display never holds it; a string the SDK refuses shows as
    malformed."""
    reading = sdk_reading(text)
    shown = display_connection_string(text)
    if reading is None:
        assert shown == "<malformed connection string>"
        return
    endpoint, credential = reading
    secret = credential.get("account_key") if isinstance(credential, dict) else credential
    if isinstance(secret, str) and len(secret) >= 4 and secret != PUBLISHED_KEY:
        assert secret in secrets_of_connection_string(text)
        assert secret not in Redactor(secrets_of_connection_string(text)).scrub(f"x {secret} y")
        if secret not in endpoint:  # a key that is also the host name is the host's to show
            assert secret not in shown


def test_a_string_the_client_takes_is_shown_by_its_endpoint() -> None:
    """The SDK client built from a name-and-key string connects to the endpoint shown."""
    text = f"AccountName=acct;AccountKey={KEY};EndpointSuffix=core.chinacloudapi.cn"
    service = BlobServiceClient.from_connection_string(text)
    assert display_connection_string(text) == f"connection string for {service.url}".rstrip("/")


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("UseDevelopmentStorage=true", "http://127.0.0.1:10000/devstoreaccount1"),
        (f"AccountName=acct;AccountKey={KEY}", "https://acct.blob.core.windows.net"),
    ],
)
def test_the_display_names_the_endpoint_the_sdk_connects_to(text: str, endpoint: str) -> None:
    """The shortcut and a name-and-key string show the endpoint the SDK derives for them."""
    assert display_connection_string(text) == f"connection string for {endpoint}"
