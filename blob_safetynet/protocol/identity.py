"""A document's identity as blob metadata: written with the bytes, read back strictly.

The protocol sends these pairs in the Put Blob (or Put Block List) that creates the blob, so
they cost no request of their own; `safetynet adopt` writes them onto legacy blobs. After the
database is restored to an earlier time, they are what lets the rows lost since be rebuilt from
the container (`safetynet recover --after-restore`).

The service's rules (https://learn.microsoft.com/rest/api/storageservices/setting-and-retrieving-properties-and-metadata-for-blob-resources):
metadata names are C# identifiers, compared without regard to case; name/value pairs are HTTP
headers; all pairs together hold at most 8 KB. Values holding anything but ASCII are to be
Base64- or URL-encoded (https://learn.microsoft.com/azure/storage/blobs/storage-blob-properties-metadata),
and a header's leading and trailing white space is not kept. So every free text (document id,
name, replaced blob name) is written as `u:` and its UTF-8 percent-encoded (RFC 3986 unreserved
characters and `/` kept, readable in the portal), or `b:` and its UTF-8 in Base64, whichever is
shorter: a 1,024-character name of 4-byte characters is 5,464 characters of Base64, so every name
the protocol accepts fits whole. When the room left is smaller (`adopt` keeps a blob's own
metadata), the name is cut to its longest prefix that fits, flagged by `safetynet_name_cut`, and
`safetynet_name_sha256` still names the whole name: a cut name is never rebuilt into a row.

Azurite checks neither the character set nor the 8 KB (it stores `é` and 9,000 bytes), so both
are checked here, on write and on read.

Reading is strict (`read_identity`): every value bounded before it is decoded, typed, canonical
(the value re-encoded must give back the same text), no unknown `safetynet_` name, no two names
that differ only in case. Nothing read is trusted about the bytes until `verify` compares it
with the length and SHA-256 of the bytes themselves.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final
from urllib.parse import quote, unquote

from blob_safetynet.store.tables import Content, Document, Status

METADATA_LIMIT: Final = 8 * 1024
"""Bytes of all metadata names and values together, the service's limit."""
PREFIX: Final = "safetynet_"
FORMAT: Final = "1"
MAX_NAME_LENGTH: Final = 1024
"""Characters of a document name (the table's `name` column)."""
MAX_ID_LENGTH: Final = 36
"""Characters of a document id (the table's `id` column)."""
MAX_BLOB_NAME_LENGTH: Final = 1024
"""Characters of a blob name (https://learn.microsoft.com/rest/api/storageservices/naming-and-referencing-containers--blobs--and-metadata)."""
MAX_LENGTH: Final = 2**63 - 1
"""The table's `content_length` is a BIGINT."""

KEY_FORMAT: Final = "safetynet_format"
KEY_DOCUMENT: Final = "safetynet_document"
KEY_NAME: Final = "safetynet_name"
KEY_NAME_SHA256: Final = "safetynet_name_sha256"
KEY_NAME_CUT: Final = "safetynet_name_cut"
KEY_SHA256: Final = "safetynet_sha256"
KEY_LENGTH: Final = "safetynet_length"
KEY_WRITTEN: Final = "safetynet_written"
KEY_REPLACES: Final = "safetynet_replaces"
REQUIRED: Final = frozenset({KEY_FORMAT, KEY_DOCUMENT, KEY_NAME, KEY_NAME_SHA256, KEY_WRITTEN})
OPTIONAL: Final = frozenset({KEY_NAME_CUT, KEY_SHA256, KEY_LENGTH, KEY_REPLACES})

_PERCENT: Final = "u:"
_BASE64: Final = "b:"
_SAFE: Final = "/"
_PERCENT_TEXT: Final = re.compile(r"[A-Za-z0-9_.~/%-]*")
_BASE64_TEXT: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_DIGITS: Final = re.compile(r"0|[1-9][0-9]{0,18}")
_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def _encoded_bound(characters: int) -> int:
    """The longest value a text of `characters` characters is written as (Base64 of 4-byte
    characters is never longer than its percent-encoding)."""
    return len(_BASE64) + 4 * ((4 * characters + 2) // 3)


MAX_VALUE: Final = {
    KEY_FORMAT: len(FORMAT),
    KEY_DOCUMENT: _encoded_bound(MAX_ID_LENGTH),
    KEY_NAME: _encoded_bound(MAX_NAME_LENGTH),
    KEY_NAME_SHA256: 64,
    KEY_NAME_CUT: 1,
    KEY_SHA256: 64,
    KEY_LENGTH: 19,
    KEY_WRITTEN: 27,
    KEY_REPLACES: _encoded_bound(MAX_BLOB_NAME_LENGTH),
}
"""Characters each value may hold; checked before anything is decoded."""


class IdentityError(ValueError):
    """Identity metadata that cannot be written (the text breaks a rule, no room left) or
    cannot be read (missing, malformed, unknown, or disagreeing with the bytes)."""


@dataclass(frozen=True)
class Identity:
    """What a blob's metadata says about the document it holds, decoded and checked for form.

    `name` is the whole name, or when `name_cut` only its head; `name_sha256` is always the
    SHA-256 of the whole name's UTF-8. `sha256` is absent for a streamed upload (its hash is
    known only once the bytes are sent) and `length` for a stream of undeclared length.
    `written_utc` is the writer's clock when the write began (for an adopted blob, its
    Last-Modified as listed). `replaces` names the blob a replace superseded, None for a put or
    an adopted blob."""

    document_id: str
    name: str
    name_sha256: str
    name_cut: bool
    written_utc: datetime
    sha256: str | None = None
    length: int | None = None
    replaces: str | None = None


@dataclass(frozen=True)
class Verified:
    """An identity whose claims the bytes bear out; only `verify` makes one, so a row is only
    rebuilt from metadata checked against the bytes. `content` is the bytes' own."""

    identity: Identity
    blob_name: str
    content: Content

    def document(self, created_utc: datetime) -> Document:
        """The Ready row this blob stands for (the content goes in `content_length` and
        `content_sha256`, from `content`)."""
        return Document(
            self.identity.document_id,
            self.identity.name,
            self.blob_name,
            Status.READY,
            created_utc,
        )


@dataclass(frozen=True)
class Succession:
    """Blobs of one document, newest first; `certain` when the `replaces` links alone order
    them all (one chain), False when the writers' clocks had to decide somewhere."""

    newest_first: tuple[str, ...]
    certain: bool

    @property
    def newest(self) -> str:
        return self.newest_first[0]


def text_problem(text: str, what: str, longest: int) -> str | None:
    """Why `text` cannot be carried as a document id, name or blob name, or None: it must be 1
    to `longest` characters of Unicode text (what the table's column holds). Control characters
    are carried (percent-encoded): a legacy row may hold them; `put` refuses them itself."""
    if not text:
        return f"{what} must not be empty"
    if len(text) > longest:
        return f"{what} is {len(text)} characters; at most {longest}"
    try:
        text.encode()
    except UnicodeEncodeError:
        return f"{what} is not valid Unicode text (it holds a lone surrogate)"
    return None


def _encode_text(text: str) -> str:
    raw = text.encode()
    percent = _PERCENT + quote(raw, safe=_SAFE)
    packed = _BASE64 + base64.b64encode(raw).decode("ascii")
    return percent if len(percent) <= len(packed) else packed


def _decode_text(value: str, key: str) -> str:
    """The text a `u:` or `b:` value holds; IdentityError unless canonical UTF-8."""
    body = value[2:]
    try:
        if value.startswith(_PERCENT) and _PERCENT_TEXT.fullmatch(body):
            text = unquote(body, errors="strict")
        elif value.startswith(_BASE64) and _BASE64_TEXT.fullmatch(body):
            text = base64.b64decode(body, validate=True).decode()
        else:
            raise IdentityError(f"{key} is neither u:<percent-encoded> nor b:<base64>")
    except (UnicodeDecodeError, binascii.Error):
        raise IdentityError(f"{key} does not hold UTF-8 text") from None
    if value not in (_PERCENT + quote(text.encode(), safe=_SAFE), _BASE64 + _b64(text)):
        raise IdentityError(f"{key} is not in its canonical form")
    return text


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def format_time(moment: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS.ffffffZ` in UTC (a naive time is taken as UTC)."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond:06d}Z"
    )


def metadata_size(metadata: Mapping[str, str]) -> int:
    """Bytes the service counts against METADATA_LIMIT: every name and value."""
    return sum(
        len(key.encode(errors="surrogatepass")) + len(value.encode(errors="surrogatepass"))
        for key, value in metadata.items()
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def encode(
    document_id: str,
    name: str,
    written_utc: datetime,
    *,
    content: Content | None = None,
    length: int | None = None,
    replaces: str | None = None,
    room: int = METADATA_LIMIT,
) -> dict[str, str]:
    """The metadata pairs naming this document, within `room` bytes.

    `content` (length and SHA-256, when known before the bytes are sent) or `length` alone.
    The name is cut only when it does not fit `room` whole (never within the full 8 KB for a
    name the protocol accepts). IdentityError when a text breaks its rule (the decoder's
    rules: what this writes, `read_identity` reads back equal) or nothing fits.
    """
    for text, what, longest in (
        (document_id, "document id", MAX_ID_LENGTH),
        (replaces, "replaced blob name", MAX_BLOB_NAME_LENGTH),
    ):
        if text is not None and (problem := text_problem(text, what, longest)):
            raise IdentityError(problem)
    if problem := text_problem(name, "document name", MAX_NAME_LENGTH):
        raise IdentityError(problem)
    if content is not None and length is not None and content.length != length:
        raise IdentityError(f"length {length} differs from the content's {content.length}")
    pairs = {
        KEY_FORMAT: FORMAT,
        KEY_DOCUMENT: _encode_text(document_id),
        KEY_NAME_SHA256: _sha256(name),
        KEY_WRITTEN: format_time(written_utc),
    }
    if content is not None:
        pairs[KEY_SHA256] = content.sha256
        length = content.length
    if length is not None:
        if not 0 <= length <= MAX_LENGTH:
            raise IdentityError(f"length {length} is out of range")
        pairs[KEY_LENGTH] = str(length)
    if replaces is not None:
        pairs[KEY_REPLACES] = _encode_text(replaces)
    left = room - metadata_size(pairs) - len(KEY_NAME)
    whole = _encode_text(name)
    if len(whole) <= left:
        return {**pairs, KEY_NAME: whole}
    left -= len(KEY_NAME_CUT) + 1
    kept = _longest_prefix(name, left)
    if kept == 0:
        raise IdentityError(
            f"no room for the document's identity: {room} bytes of metadata left, "
            f"{metadata_size(pairs)} taken before its name"
        )
    return {**pairs, KEY_NAME: _encode_text(name[:kept]), KEY_NAME_CUT: "1"}


def _longest_prefix(name: str, room: int) -> int:
    """Characters of `name` whose encoding fits `room` (an encoding's length never shrinks
    as the prefix grows, so a binary search finds it)."""
    low, high = 0, len(name)
    while low < high:
        middle = (low + high + 1) // 2
        if len(_encode_text(name[:middle])) <= room:
            low = middle
        else:
            high = middle - 1
    return low


def identity_keys(metadata: Mapping[str, str] | None) -> list[str]:
    """The names in `metadata` that belong to the identity, in any case."""
    return [key for key in metadata or {} if key.lower().startswith(PREFIX)]


def claims_identity(metadata: Mapping[str, str] | None) -> bool:
    """Whether `metadata` holds any identity name: written by the protocol or adopt, whether
    or not it reads back."""
    return bool(identity_keys(metadata))


def without_identity(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """`metadata` with every identity name removed (the blob's own pairs)."""
    owned = set(identity_keys(metadata))
    return {key: value for key, value in (metadata or {}).items() if key not in owned}


def read_identity(metadata: Mapping[str, str] | None) -> Identity | None:
    """The identity `metadata` holds, None when it holds none ("identity unknown": a blob
    written before identities were, or not by the protocol).

    IdentityError when it holds identity names that do not read back exactly: an unknown
    format or name, a name given twice in different case, a missing pair, a value too long,
    malformed or not canonical, an uncut name that disagrees with its SHA-256. The bytes are
    not checked here: `verify` does that.
    """
    keys = identity_keys(metadata)
    if not keys or metadata is None:
        return None
    if metadata_size(metadata) > METADATA_LIMIT:
        raise IdentityError(f"the metadata holds more than {METADATA_LIMIT} bytes")
    pairs: dict[str, str] = {}
    for key in keys:
        folded = key.lower()
        if folded in pairs:
            raise IdentityError(f"{folded} is given twice")
        if folded not in REQUIRED | OPTIONAL:
            raise IdentityError(f"unknown identity name {folded[:64]!r}")
        value = metadata[key]
        if len(value) > MAX_VALUE[folded]:
            raise IdentityError(
                f"{folded} holds {len(value)} characters; at most {MAX_VALUE[folded]}"
            )
        pairs[folded] = value
    if (found := pairs.get(KEY_FORMAT)) != FORMAT:
        raise IdentityError(f"unknown identity format {found!r}; this reader knows {FORMAT!r}")
    missing = sorted(REQUIRED - set(pairs))
    if missing:
        raise IdentityError(f"identity lacks {', '.join(missing)}")
    return _decoded(pairs)


def _decoded(pairs: Mapping[str, str]) -> Identity:
    document_id = _decode_text(pairs[KEY_DOCUMENT], KEY_DOCUMENT)
    if problem := text_problem(document_id, "document id", MAX_ID_LENGTH):
        raise IdentityError(problem)
    cut = pairs.get(KEY_NAME_CUT)
    if cut not in (None, "1"):
        raise IdentityError(f"{KEY_NAME_CUT} must be '1' when present")
    name = _decode_text(pairs[KEY_NAME], KEY_NAME)
    if problem := text_problem(name, "document name", MAX_NAME_LENGTH):
        raise IdentityError(problem)
    name_sha256 = _hex64(pairs, KEY_NAME_SHA256)
    if not cut and _sha256(name) != name_sha256:
        raise IdentityError(f"{KEY_NAME} does not match {KEY_NAME_SHA256}")
    replaces = pairs.get(KEY_REPLACES)
    if replaces is not None:
        replaces = _decode_text(replaces, KEY_REPLACES)
        if problem := text_problem(replaces, "replaced blob name", MAX_BLOB_NAME_LENGTH):
            raise IdentityError(problem)
    return Identity(
        document_id=document_id,
        name=name,
        name_sha256=name_sha256,
        name_cut=cut is not None,
        written_utc=_time(pairs[KEY_WRITTEN]),
        sha256=_hex64(pairs, KEY_SHA256) if KEY_SHA256 in pairs else None,
        length=_length(pairs[KEY_LENGTH]) if KEY_LENGTH in pairs else None,
        replaces=replaces,
    )


def _hex64(pairs: Mapping[str, str], key: str) -> str:
    value = pairs[key]
    if not _HEX64.fullmatch(value):
        raise IdentityError(f"{key} is not 64 lowercase hex digits")
    return value


def _length(value: str) -> int:
    if not _DIGITS.fullmatch(value) or int(value) > MAX_LENGTH:
        raise IdentityError(f"{KEY_LENGTH} is not a whole number of bytes")
    return int(value)


def _time(value: str) -> datetime:
    if not _TIME.fullmatch(value):
        raise IdentityError(f"{KEY_WRITTEN} is not YYYY-MM-DDTHH:MM:SS.ffffffZ")
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        raise IdentityError(f"{KEY_WRITTEN} is not a real time") from None


def verify(identity: Identity, blob_name: str, content: Content) -> Verified:
    """`identity` for the blob `blob_name` whose bytes measured `content` (their length and
    SHA-256, read by the caller): Verified when every claim the metadata makes about the bytes
    holds, IdentityError otherwise, or when the name was cut (the whole name is not there to
    rebuild a row with)."""
    if identity.name_cut:
        raise IdentityError(
            f"blob {blob_name!r}: the metadata holds only the head of the document's name"
        )
    if identity.length is not None and identity.length != content.length:
        raise IdentityError(
            f"blob {blob_name!r} holds {content.length} bytes; its metadata says {identity.length}"
        )
    if identity.sha256 is not None and identity.sha256 != content.sha256:
        raise IdentityError(f"blob {blob_name!r}: its bytes' SHA-256 differs from its metadata's")
    return Verified(identity, blob_name, content)


def succession(blobs: Mapping[str, Identity]) -> Succession:
    """The blobs of one document (blob name -> identity), newest first.

    A blob comes before the blob it `replaces`; where the links leave a choice (a blob between
    them already deleted, two replaces that raced, links that loop) the later `written_utc`
    comes first, then the greater blob name, and the answer is not `certain`. ValueError when
    the identities name different documents or none is given.
    """
    documents = {identity.document_id for identity in blobs.values()}
    if len(documents) != 1:
        raise ValueError(f"succession needs the blobs of one document, not {len(documents)}")
    left = dict(blobs)
    order: list[str] = []
    certain = True
    while left:
        replaced = {i.replaces for i in left.values() if i.replaces in left}
        heads = [name for name in left if name not in replaced] or list(left)
        certain = certain and len(heads) == 1 and len(left) - len(replaced) == 1
        head = max(heads, key=lambda name: (left[name].written_utc, name))
        order.append(head)
        del left[head]
    return Succession(tuple(order), certain)
