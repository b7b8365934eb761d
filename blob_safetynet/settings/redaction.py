"""The one redaction path: what a message, log line or report may show of a secret-bearing input.

Database URLs show scheme, host, port and database only (no user info, no query values); account
URLs show no query string (a SAS); connection strings show their blob endpoint only; tokens are
never shown. `Redactor.scrub` is the last line of defence on every output stream: it removes the
secrets it was told about (in every spelling the input could take) and anything that looks like
a credential. Standard library only: it is in the bottom layer, which the CLI, `blob_safetynet/sweeper/`,
`blob_safetynet/policies/` and `infra/` all use.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TextIO
from urllib.parse import quote, quote_plus, unquote, unquote_plus

_MARKUP = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"))


def _markup_escaped(text: str, apostrophe: str) -> str:
    """`text` as HTML (`html.escape`, apostrophe `&#x27;`) or XML (`&apos;`) writes it: inlined,
    because `xml.sax.saxutils` imports `urllib.request` and every command pays for it at start."""
    for raw, entity in _MARKUP:
        text = text.replace(raw, entity)
    return text.replace("'", apostrophe)


HIDDEN = "***"
MIN_SECRET_LENGTH = 4
"""Shorter known secrets are not replaced verbatim (every 'a' would vanish); patterns still apply."""

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<rest>.*)$", re.DOTALL)
_HOST = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_%]*)(?::[0-9]{0,5})?$")
_PATH = re.compile(r"^/[\w.\-/~ %:+,=]*$")
_SENSITIVE_KEYS = (
    r"sig|password|passwd|pwd|secret|client_secret|token|access_token|refresh_token|id_token|"
    r"apikey|api_key|accountkey|sharedaccesssignature|sharedaccesskey"
)
PUBLISHED_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
"""The Azurite emulator's development account key (account `devstoreaccount1`), which Microsoft
publishes and every emulator accepts: https://learn.microsoft.com/en-us/azure/storage/common/
storage-connect-azurite#use-the-well-known-storage-account-and-key. It opens nothing but a
local emulator, so it is shown wherever it appears; hiding it only hides how to reach one."""


def _hide_value(match: re.Match[str]) -> str:
    if match[3] == PUBLISHED_KEY:
        return match[0]
    return f"{match[1]}{match[2]}{HIDDEN}"


_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # user info of any URL, up to the last '@' before the host (an unencoded '@' in a password
    # must not leave half of it behind)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#\"'<>]*@"), r"\1"),
    # key=value pairs whose key names a credential: URL queries, connection strings, headers
    (re.compile(rf"(?i)\b({_SENSITIVE_KEYS})(\s*[=:]\s*)([^\s&;,\"'<>]+)"), _hide_value),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9\-._~+/]{16,}=*"), rf"\1 {HIDDEN}"),
    # a JSON Web Token wherever it appears (Microsoft Entra access tokens are JWTs)
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"), HIDDEN),
)


def _split_url(text: str) -> tuple[str, str, str, str] | None:
    """(scheme, user info, host[:port], path) of `text`, user info up to the LAST '@'."""
    match = _SCHEME.match(text.strip())
    if match is None:
        return None
    rest = match["rest"]
    userinfo, at, after = rest.rpartition("@")
    if not at:
        userinfo, after = "", rest
    end = len(after)
    for mark in "/?#":
        index = after.find(mark)
        if index != -1:
            end = min(end, index)
    hostport, tail = after[:end], after[end:]
    path = re.split(r"[?#]", tail, maxsplit=1)[0]
    return match["scheme"].lower(), userinfo, hostport, path


def display_url(text: str, kind: str = "URL") -> str:
    """Scheme, host, port and path of a URL; never user info, query or fragment.

    Whatever does not look like a host name or a plain path is hidden instead of shown, so a
    URL that fooled the split (an unencoded '@' in a query value) still shows no secret.
    """
    parts = _split_url(text)
    if parts is None:
        return f"<unparsable {kind}>"
    scheme, _, hostport, path = parts
    host = hostport if _HOST.fullmatch(hostport) else "<host hidden>"
    shown_path = path if not path or _PATH.fullmatch(path) else "/<path hidden>"
    return f"{scheme}://{host}{shown_path}"


def display_db_url(text: str) -> str:
    """A database URL as scheme://host[:port]/database (sqlite: its file path)."""
    return display_url(text, "database URL")


def display_connection_string(text: str) -> str:
    """Only the blob endpoint a connection string points at (never its key or SAS)."""
    reading = read_connection_string(text)
    if reading is None:
        return "<malformed connection string>"
    return f"connection string for {display_url(reading.blob_endpoint)}"


DEVELOPMENT_ENDPOINT = "http://127.0.0.1:10000/devstoreaccount1"
"""What `UseDevelopmentStorage=true` names: Azurite's default blob port and account."""
DEVELOPMENT_ACCOUNT = "devstoreaccount1"
AZURE_BLOB_SUFFIX = "core.windows.net"


@dataclass(frozen=True)
class ConnectionString:
    """A connection string as the Blob SDK reads it: the primary blob endpoint as written or
    derived, and the credential it carries (name and key, or a SAS)."""

    blob_endpoint: str
    account_name: str | None
    account_key: str | None
    sas: str | None


def read_connection_string(text: str) -> ConnectionString | None:
    """`text` read as azure-storage-blob 12 reads it (`_shared/base_client.py`,
    `parse_connection_str`), or None where the SDK refuses it.

    Keys are matched upper-cased and exactly (a space is part of a key), the last of a
    duplicate wins, values are kept as written, `UseDevelopmentStorage=true` names Azurite's
    default account, and the endpoint is `BlobEndpoint` or made of `DefaultEndpointsProtocol`,
    `AccountName` and `EndpointSuffix`. `tests/test_connection_string_reading.py` holds this
    to the SDK on generated strings."""
    pairs = [part.split("=", 1) for part in text.rstrip(";").split(";")]
    if any(len(pair) != 2 for pair in pairs):
        return None
    fields = {key.upper(): value for key, value in pairs}
    if fields.get("USEDEVELOPMENTSTORAGE") == "true":
        return ConnectionString(DEVELOPMENT_ENDPOINT, DEVELOPMENT_ACCOUNT, PUBLISHED_KEY, None)
    name = fields.get("ACCOUNTNAME")
    keyed = name is not None and "ACCOUNTKEY" in fields
    endpoint = fields.get("BLOBENDPOINT")
    if endpoint is None:
        if "BLOBSECONDARYENDPOINT" in fields:
            return None
        if name is not None and "DEFAULTENDPOINTSPROTOCOL" in fields and "ENDPOINTSUFFIX" in fields:
            endpoint = (
                f"{fields['DEFAULTENDPOINTSPROTOCOL']}://{name}.blob.{fields['ENDPOINTSUFFIX']}"
            )
    if not endpoint:
        if name is None:
            return None
        endpoint = f"https://{name}.blob.{fields.get('ENDPOINTSUFFIX', AZURE_BLOB_SUFFIX)}"
    return ConnectionString(
        endpoint,
        name if keyed else None,
        fields["ACCOUNTKEY"] if keyed else None,
        None if keyed else fields.get("SHAREDACCESSSIGNATURE"),
    )


def _connection_string_fields(text: str) -> dict[str, str]:
    """Every `key=value` of `text`, keys lower-cased and stripped: a looser reading than the
    SDK's, so that a key the SDK would not even use is still hidden."""
    fields = {}
    for part in text.split(";"):
        key, eq, value = part.partition("=")
        if eq:
            fields[key.strip().lower()] = value.strip()
    return fields


_PUBLIC_VALUE = re.compile(
    r"(?i)(?:true|false|yes|no|on|off|[0-9]{1,12}(?:\.[0-9]{1,6})?|"
    r"disable|allow|prefer|require|verify-ca|verify-full|memory|ro|rw|rwc|shared|private)"
)
"""Query values that carry no knowledge (booleans, numbers, libpq's sslmode and SQLite's mode
and cache words): masking them would hide words every message uses (`in-memory`,
`sslmode=require`) while protecting nothing. Any other value counts as a secret."""
_SENSITIVE_KEY = re.compile(rf"(?i)(?:{_SENSITIVE_KEYS})")


def secrets_of_url(text: str) -> list[str]:
    """The secret parts of a URL: its password (and the user info holding it) and every query
    value that is not a keyword or a number (any value of a credential-named key).

    A user name without a password is no secret: it stays visible (`role "alice" does not
    exist` must say who), as do the scheme, host and database name.
    """
    parts = _split_url(text)
    if parts is None:
        return [text]
    _, userinfo, _, _ = parts
    password = userinfo.partition(":")[2]
    found = [userinfo, password] if password else []
    # A password with an unencoded '@' is split differently by other parsers (SQLAlchemy stops
    # at the first '@'): every prefix a parser might take is a secret too.
    found += [password.split("@", 1)[0]] if "@" in userinfo and password else []
    query = re.split(r"[?]", text, maxsplit=1)
    if len(query) == 2:
        for pair in re.split(r"[&;]", query[1].split("#", 1)[0]):
            key, _, value = pair.partition("=")
            if _SENSITIVE_KEY.fullmatch(unquote(key)) or not _PUBLIC_VALUE.fullmatch(value):
                found.append(value)
    return found


def secrets_of_connection_string(text: str) -> list[str]:
    """Account keys and SAS tokens of a connection string: what the SDK signs with and what the
    looser reading finds (hiding more than the SDK uses is the safe side)."""
    fields = _connection_string_fields(text)
    reading = read_connection_string(text)
    keys = [fields.get("accountkey", ""), reading.account_key if reading else None]
    signatures = [fields.get("sharedaccesssignature", ""), reading.sas if reading else None]
    found = [key for key in keys if key]
    for sas in filter(None, signatures):
        found += [sas, *(pair.partition("=")[2] for pair in sas.split("&"))]
    return found


def secrets_in(values: Iterable[str | None]) -> list[str]:
    """Every part of these option values or settings that could be a secret.

    URLs give their user info and query values, connection strings their key and SAS; a
    `--option=value` word counts as its value.
    """
    found: list[str] = []
    for raw in filter(None, values):
        value = raw.partition("=")[2] if raw.startswith("--") and "=" in raw else raw
        if "://" in value:
            found += secrets_of_url(value)
        if "=" in value and ";" in value:
            found += secrets_of_connection_string(value)
    return found


def spellings(secret: str) -> set[str]:
    """Every form a secret may take on its way into a message: as given and stripped, percent-
    and form-decoded ('+' as a space) and encoded, JSON- and XML-escaped, and escaped for
    display."""
    bases = {secret, secret.strip(), unquote(secret), unquote_plus(secret)}
    found = set()
    for base in bases:
        found |= {
            base,
            base.strip(),
            # surrogatepass: a secret from the environment may hold lone surrogates.
            quote(base, safe="", errors="surrogatepass"),
            quote_plus(base, safe="", errors="surrogatepass"),
            json.dumps(base)[1:-1],
            json.dumps(base, ensure_ascii=False)[1:-1],
            _markup_escaped(base, "&#x27;"),
            _markup_escaped(base, "&apos;"),
            printable(base),
            repr(base)[1:-1],
        }
    return found


class Redactor:
    """Removes known secrets and credential-looking text from anything about to be shown.

    Known secrets match whatever their case (SQLAlchemy lower-cases some values before a driver
    quotes them) in every spelling of `spellings`.
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: list[str] = []
        self._known: re.Pattern[str] | None = None
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        """Remember secrets, each in every spelling."""
        for secret in secrets:
            if not secret or secret.strip() == PUBLISHED_KEY:
                continue
            for variant in spellings(secret):
                if len(variant) >= MIN_SECRET_LENGTH and variant not in self._secrets:
                    self._secrets.append(variant)
        # Longest first, so a secret containing another is replaced whole.
        self._secrets.sort(key=len, reverse=True)
        self._known = (
            re.compile("|".join(map(re.escape, self._secrets)), re.IGNORECASE)
            if self._secrets
            else None
        )

    def scrub(self, text: str) -> str:
        if self._known is not None:
            text = self._known.sub(HIDDEN, text)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text


_SHORT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str, *, backslashes: bool = True) -> str:
    """`text` with control, format, unassigned, private-use and line-separator characters (and
    backslashes) escaped.

    Names come from users and from the container: a blob named "x\\ncontainer and table
    agree" must print as one line that says what it is, not forge a second line.
    `backslashes=False` leaves backslashes alone, for whole messages whose names were escaped
    already (escaping twice would print `\\\\n`).
    """
    out = []
    for char in text:
        if char == "\\" and not backslashes:
            out.append(char)
        elif char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif unicodedata.category(char) in ("Cc", "Cf", "Cn", "Co", "Cs", "Zl", "Zp"):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


class RedactingFilter(logging.Filter):
    """A handler filter that scrubs each record's final message (and drops its arguments)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redactor.scrub(record.getMessage())
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            # The formatter would print the exception's own words; keep only its scrubbed text.
            error = record.exc_info[1]
            record.msg += f" ({type(error).__name__}: {self.redactor.scrub(str(error))})"
            record.exc_info = None
            record.exc_text = None
        return True


class ScrubbingStream:
    """A text stream that scrubs every write before passing it on (stdout, stderr, files)."""

    def __init__(self, stream: TextIO, redactor: Redactor) -> None:
        self._stream = stream
        self._redactor = redactor

    def write(self, text: str) -> int:
        self._stream.write(self._redactor.scrub(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8") or "utf-8"
