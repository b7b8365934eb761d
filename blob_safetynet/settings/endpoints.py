"""The one reading of an endpoint URL that a credential (a token or a key) is sent to.

The rule that decides whether a host is allowed and the HTTP stack that connects must read the
same host. `urllib.parse` and urllib3 (the parser under requests and so under azure-core's
transport) disagree on authorities outside the plain grammar: urlsplit reads
`https://localhost\\.blob.core.windows.net` as a host ending in an Azure suffix while urllib3
ends the host at the backslash and connects to `localhost`; urllib3 decodes `%2e` in a host,
urlsplit does not; resolvers treat `host.` and `host` alike but a suffix comparison does not.
So only the grammar both read alike is accepted: printable ASCII without backslashes or
whitespace, no user info, no percent-encoding in the authority, host names of letters, digits
and inner hyphens in dot-separated labels (no trailing dot), dotted-quad IPv4, or a bracketed
IPv6 literal without a zone id, and a decimal port. Everything else is refused with the part
named, never repaired. Standard library only: the CLI, `blob_safetynet/sweeper/` and `blob_safetynet/policies/` share it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from blob_safetynet.settings.appsettings import SettingsError
from blob_safetynet.settings.redaction import display_url

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<authority>[^/?#]*)(?P<rest>.*)")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?", re.ASCII)
_PORT = re.compile(r"[0-9]{1,5}", re.ASCII)
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)", re.ASCII)
"""A last label a URL parser (WHATWG) or a resolver (inet_aton) reads as part of an IPv4
address: `127.1`, `0x7f.0.0.1` and `2130706433` all reach 127.0.0.1."""
MAX_HOST_LENGTH = 253


@dataclass(frozen=True)
class Endpoint:
    """An endpoint URL as the HTTP client will use it; `host` is lower-case."""

    scheme: str
    host: str
    port: int | None
    rest: str
    """Path, query and fragment as given."""

    @property
    def loopback(self) -> bool:
        return is_loopback_host(self.host.strip("[]"))

    @property
    def has_query(self) -> bool:
        return "?" in self.rest or "#" in self.rest


def is_loopback_host(host: str) -> bool:
    """`localhost` or a loopback IP address (an IPv6 one without brackets)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_endpoint(url: str, setting: str) -> Endpoint:
    """`url` read as the connecting client reads it, or a SettingsError naming what is refused."""
    shown = display_url(url)
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        raise SettingsError(
            f"{setting} {shown} holds whitespace, control or non-ASCII characters; "
            "write the host in ASCII (punycode for an internationalized name)"
        )
    if "\\" in url:
        raise SettingsError(f"{setting} {shown} holds a backslash, which URL parsers read apart")
    match = _URL.fullmatch(url)
    if match is None:
        raise SettingsError(f"{setting} {shown} is not a URL; expected https://host[:port]")
    authority = match["authority"]
    if "@" in authority:
        raise SettingsError(f"{setting} {shown} must not carry user info")
    if "%" in authority:
        raise SettingsError(f"{setting} {shown} has a percent-encoded host; write it plainly")
    host, port = _split_port(authority, setting, shown)
    return Endpoint(
        match["scheme"].lower(), _checked_host(host, setting, shown), port, match["rest"]
    )


def _split_port(authority: str, setting: str, shown: str) -> tuple[str, int | None]:
    """(host, port) of an authority; an IPv6 literal keeps its brackets."""
    end = authority.find("]") + 1 if authority.startswith("[") else 0
    host, colon, port = authority[end:].partition(":")
    host = authority[:end] + host
    if not colon:
        return host, None
    if not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
        raise SettingsError(f"{setting} {shown} has a port that is not a number from 1 to 65535")
    return host, int(port)


def _checked_host(host: str, setting: str, shown: str) -> str:
    host = host.lower()
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise SettingsError(
                f"{setting} {shown} has a bracketed host that is not an IPv6 address "
                "(zone ids are refused)"
            ) from None
        return host
    labels = host.split(".")
    if host.endswith("."):
        raise SettingsError(f"{setting} {shown} ends its host with a dot; remove it")
    if len(host) > MAX_HOST_LENGTH or not all(_LABEL.fullmatch(label) for label in labels):
        raise SettingsError(
            f"{setting} {shown} has no valid host name: use letters, digits and inner hyphens "
            "in dot-separated labels, an IPv4 address or a bracketed IPv6 address"
        )
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise SettingsError(
                f"{setting} {shown} has a numeric host that is not a dotted-quad IPv4 address"
            ) from None
    return host
