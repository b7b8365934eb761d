"""The identity metadata's encoder and its strict decoder (blob_safetynet/protocol/identity.py),
without a service: what is written reads back equal, within the service's rules, and what does
not read back exactly is refused with its reason."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blob_safetynet.protocol import identity
from blob_safetynet.protocol.identity import IdentityError, read_identity
from blob_safetynet.store.tables import Content, Status

WHEN = datetime(2026, 12, 5, 7, 30, 1, 123456, tzinfo=UTC)
BYTES = b"the document's bytes"
CONTENT = Content(len(BYTES), hashlib.sha256(BYTES).hexdigest())
CSHARP_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HEADER_VALUE = re.compile(r"[!-~]([ -~]*[!-~])?")
"""Visible ASCII, spaces only inside: what an HTTP header keeps as sent."""

names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=1024)
ids = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=36)


def written(**changes: object) -> dict[str, str]:
    arguments: dict[str, object] = {"content": CONTENT, "replaces": "0f" * 16 + ".pdf"}
    arguments.update(changes)
    return identity.encode("doc-1", "reports/q1.pdf", WHEN, **arguments)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    document_id=ids,
    name=names,
    replaces=st.none() | names,
    length=st.integers(0, identity.MAX_LENGTH),
    moment=st.datetimes(timezones=st.just(UTC)),
)
def test_every_name_the_protocol_accepts_round_trips_within_the_service_rules(
    document_id: str, name: str, replaces: str | None, length: int, moment: datetime
) -> None:
    """Any id, name (up to 1,024 characters of any plane, control characters a legacy row may
    hold included) and replaced blob name reads back equal, in names that are C# identifiers
    and ASCII header values, within 8 KiB."""
    metadata = identity.encode(
        document_id, name, moment, content=Content(length, "ab" * 32), replaces=replaces
    )
    read = read_identity(metadata)
    assert read is not None
    assert (read.document_id, read.name, read.replaces) == (document_id, name, replaces)
    assert (read.length, read.sha256, read.written_utc) == (length, "ab" * 32, moment)
    assert read.name_sha256 == hashlib.sha256(name.encode()).hexdigest()
    assert identity.metadata_size(metadata) <= identity.METADATA_LIMIT
    assert all(CSHARP_IDENTIFIER.fullmatch(key) for key in metadata)
    assert all(HEADER_VALUE.fullmatch(value) for value in metadata.values())
    if replaces is None or len(replaces) < 512:
        assert not read.name_cut


@pytest.mark.parametrize(
    "name",
    [
        "\U0001f600" * 1024,
        "é" * 1024,
        "x" * 1024,
        "  leading and trailing  ",
        "100%/ok?&=#",
        "\x7f\x85\u2028 DEL, NEL and LINE SEPARATOR",
        "legacy\tname with\na newline\x00",
        "   ",
        "日本語の文書.pdf",
    ],
    ids=[
        "emoji-1024",
        "latin-1024",
        "ascii-1024",
        "spaces",
        "url-syntax",
        "c1-controls",
        "c0-controls",
        "blank",
        "cjk",
    ],
)
def test_hostile_names_round_trip_whole(name: str) -> None:
    """Names that are long, outside ASCII, full of URL and header syntax, or hold what only a
    legacy row can (C0 controls, blanks: `put` refuses them) come back whole."""
    read = read_identity(identity.encode("d", name, WHEN))
    assert read is not None
    assert (read.name, read.name_cut) == (name, False)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("lone \ud800 surrogate", "lone surrogate"),
        ("x" * 1025, "1025 characters; at most 1024"),
        ("", "must not be empty"),
    ],
)
def test_names_it_cannot_hold_are_refused_with_the_reason(name: str, message: str) -> None:
    """A name the reader would refuse is refused by the writer, saying why."""
    with pytest.raises(IdentityError, match=message):
        identity.encode("doc-1", name, WHEN)


def test_a_document_id_longer_than_the_table_holds_is_refused() -> None:
    """The id column holds 36 characters: a longer id is refused before anything is written."""
    with pytest.raises(IdentityError, match="document id is 37 characters; at most 36"):
        identity.encode("x" * 37, "n", WHEN)


def test_metadata_without_identity_names_is_identity_unknown() -> None:
    """A blob written before identities were (or not by the protocol) has no identity: None."""
    assert read_identity(None) is None
    assert read_identity({}) is None
    assert read_identity({"tenant": "t1", "Safetynet": "x"}) is None


def test_names_are_read_without_regard_to_case_and_kept_apart_from_the_blob_s_own() -> None:
    """The service compares names without case: upper-case names read the same; the blob's own
    pairs are neither read nor dropped by `without_identity`."""
    metadata = {key.upper(): value for key, value in written().items()} | {"Tenant": "t1"}
    read = read_identity(metadata)
    assert read is not None
    assert read.name == "reports/q1.pdf"
    assert identity.claims_identity(metadata)
    assert identity.without_identity(metadata) == {"Tenant": "t1"}


def _with(key: str, value: str | None) -> dict[str, str]:
    metadata = written()
    if value is None:
        del metadata[key]
    else:
        metadata[key] = value
    return metadata


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (_with(identity.KEY_FORMAT, "2"), "unknown identity format '2'"),
        (_with(identity.KEY_FORMAT, None), "unknown identity format None"),
        (_with(identity.KEY_DOCUMENT, None), "identity lacks safetynet_document"),
        (_with(identity.KEY_WRITTEN, None), "identity lacks safetynet_written"),
        ({**written(), "SAFETYNET_FORMAT": "1"}, "safetynet_format is given twice"),
        ({**written(), "safetynet_owner": "x"}, "unknown identity name 'safetynet_owner'"),
        (_with(identity.KEY_NAME, "reports/q1.pdf"), "neither u:<percent-encoded> nor b:"),
        (_with(identity.KEY_NAME, "u:reports%2fq1.pdf"), "not in its canonical form"),
        (_with(identity.KEY_NAME, "u:reports%zz"), "not in its canonical form"),
        (_with(identity.KEY_NAME, "u:%C3%28"), "does not hold UTF-8 text"),
        (_with(identity.KEY_NAME, "b:cmVwb3J0cw"), "does not hold UTF-8 text"),
        (_with(identity.KEY_NAME, "u:"), "document name must not be empty"),
        (_with(identity.KEY_NAME, "u:other.pdf"), "does not match safetynet_name_sha256"),
        (_with(identity.KEY_NAME, "u:" + "x" * 6000), "holds 6002 characters; at most 5466"),
        (_with(identity.KEY_DOCUMENT, "u:" + "d" * 37), "document id is 37 characters"),
        (_with(identity.KEY_NAME_SHA256, "AB" * 32), "not 64 lowercase hex digits"),
        (_with(identity.KEY_SHA256, "abc"), "not 64 lowercase hex digits"),
        (_with(identity.KEY_LENGTH, "-1"), "not a whole number of bytes"),
        (_with(identity.KEY_LENGTH, "007"), "not a whole number of bytes"),
        (_with(identity.KEY_LENGTH, "9223372036854775808"), "not a whole number of bytes"),
        (_with(identity.KEY_WRITTEN, "2026-12-05T07:30:01Z"), "not YYYY-MM-DDTHH:MM:SS.ffffffZ"),
        (_with(identity.KEY_WRITTEN, "2026-02-30T07:30:01.000000Z"), "not a real time"),
        (_with(identity.KEY_NAME_CUT, "0"), "must be '1' when present"),
        ({**written(), "filler": "x" * 8000}, "more than 8192 bytes"),
    ],
    ids=lambda value: value[:40] if isinstance(value, str) else "",
)
def test_metadata_that_does_not_read_back_exactly_is_refused(
    metadata: dict[str, str], message: str
) -> None:
    """Missing, repeated, unknown, malformed, non-canonical, oversized or self-contradicting
    identity pairs raise IdentityError naming the pair; nothing is guessed."""
    with pytest.raises(IdentityError, match=re.escape(message)):
        read_identity(metadata)


def test_a_name_too_long_for_the_room_left_is_cut_flagged_and_never_rebuilt() -> None:
    """With little room (a legacy blob's own metadata), the name keeps its longest head that
    fits, flagged, with the whole name's SHA-256; `verify` will not rebuild a row from it."""
    name = "\U0001f600" * 1024
    metadata = identity.encode("doc-1", name, WHEN, room=3000)
    read = read_identity(metadata)
    assert read is not None
    assert read.name_cut
    assert name.startswith(read.name)
    assert 0 < len(read.name) < len(name)
    assert read.name_sha256 == hashlib.sha256(name.encode()).hexdigest()
    assert identity.metadata_size(metadata) <= 3000
    with pytest.raises(IdentityError, match="only the head of the document's name"):
        identity.verify(read, "blob", CONTENT)
    with pytest.raises(IdentityError, match="no room for the document's identity"):
        identity.encode("doc-1", name, WHEN, room=200)


def test_verify_takes_the_bytes_word_over_the_metadata_s() -> None:
    """A row is rebuilt only from an identity whose length and SHA-256 the bytes bear out."""
    read = read_identity(written())
    assert read is not None
    verified = identity.verify(read, "blob.pdf", CONTENT)
    row = verified.document(WHEN)
    assert (row.id, row.name, row.blob_name, row.status) == (
        "doc-1",
        "reports/q1.pdf",
        "blob.pdf",
        Status.READY,
    )
    with pytest.raises(IdentityError, match="its bytes' SHA-256 differs"):
        identity.verify(read, "blob.pdf", Content(CONTENT.length, "0" * 64))
    with pytest.raises(IdentityError, match="holds 3 bytes; its metadata says 20"):
        identity.verify(read, "blob.pdf", Content(3, CONTENT.sha256))


def test_a_streamed_upload_s_identity_is_checked_on_what_it_claims() -> None:
    """No SHA-256 (a stream's is known only after it is sent): the bytes' own hash is taken."""
    read = read_identity(identity.encode("d", "n", WHEN, length=20))
    assert read is not None
    assert read.sha256 is None
    assert identity.verify(read, "b", CONTENT).content == CONTENT


def _chain(*links: tuple[str, str | None, int]) -> dict[str, identity.Identity]:
    blobs = {}
    for blob, replaces, minute in links:
        metadata = identity.encode("d", "n", WHEN + timedelta(minutes=minute), replaces=replaces)
        read = read_identity(metadata)
        assert read is not None
        blobs[blob] = read
    return blobs


def test_the_replaces_links_order_one_document_s_blobs_before_the_clocks_do() -> None:
    """A blob comes before the one it replaced even when its writer's clock is behind; the
    order is certain only when the links alone give it."""
    whole = identity.succession(_chain(("a", None, 5), ("b", "a", 0), ("c", "b", -9)))
    assert whole == identity.Succession(("c", "b", "a"), certain=True)
    gap = identity.succession(_chain(("a", None, 0), ("c", "b", 9)))
    assert gap == identity.Succession(("c", "a"), certain=False)
    raced = identity.succession(_chain(("a", None, 0), ("b", "a", 1), ("b2", "a", 2)))
    assert raced.newest == "b2"
    assert not raced.certain
    looped = identity.succession(_chain(("a", "b", 0), ("b", "a", 1)))
    assert looped == identity.Succession(("b", "a"), certain=False)
    with pytest.raises(ValueError, match="one document"):
        identity.succession({})
