"""The inventory's manifest and its Tags text are read through untrusted.py's bounds."""

from __future__ import annotations

import pytest

from blob_safetynet.reconcile import inventory_report as inventory
from blob_safetynet.settings.untrusted import MAX_DEPTH


def test_a_deeply_nested_manifest_is_an_inventory_error() -> None:
    """A manifest nested 100,000 levels is an InventoryError naming it, not a RecursionError."""
    with pytest.raises(inventory.InventoryError, match=f"m.json nests deeper than {MAX_DEPTH}"):
        inventory._parse_manifest(b"[" * 100_000 + b"]" * 100_000, "m.json")


def test_a_manifest_over_the_bound_is_an_inventory_error() -> None:
    """A manifest larger than MAX_MANIFEST_BYTES is refused before it is parsed."""
    big = b'{"a": "' + b"x" * inventory.MAX_MANIFEST_BYTES + b'"}'
    with pytest.raises(inventory.InventoryError, match="larger than"):
        inventory._parse_manifest(big, "m.json")


@pytest.mark.parametrize(
    ("text", "words"),
    [("[" * 10_000, "nests deeper"), ('{"state": "' + "x" * 20_000 + '"}', "larger than")],
)
def test_a_hostile_tags_text_is_an_inventory_error(text: str, words: str) -> None:
    """A row's Tags text too deep or too long is an InventoryError, not a RecursionError."""
    with pytest.raises(inventory.InventoryError, match=words):
        inventory._state_from_text(text)


def test_a_tags_text_within_the_bounds_gives_its_state() -> None:
    """An ordinary Tags object still gives its state tag."""
    assert inventory._state_from_text('{"state": "pending", "x": "y"}') == "pending"
