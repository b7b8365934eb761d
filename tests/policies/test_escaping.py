"""The escaping rule of each format (blob_safetynet/policies/reports/escaping.py), one behaviour per test."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from blob_safetynet.policies.reports import escaping


def test_terminal_shows_escape_sequences_as_text() -> None:
    """ESC, BEL and a newline come out as visible escapes, on one line."""
    assert escaping.terminal("\x1b]0;t\x07\nrow") == "\\x1b]0;t\\x07\\nrow"


def test_xml_escapes_as_the_terminal_does() -> None:
    """Tab, newline, CR, NUL, ESC, a C1 control and U+202E all become visible escapes, as in
    every other format; the element parses."""
    text = escaping.xml("a\tb\nc\rd\x00e\x1bf\x85g\u202eh")
    assert text == "a\\tb\\nc\\rd\\x00e\\x1bf\\x85g\\u202eh"
    element = ET.Element("failure", message=text)
    assert ET.fromstring(ET.tostring(element)).get("message") is not None  # noqa: S314 (own output)


def test_markdown_escapes_every_ascii_punctuation_character() -> None:
    """A link, an image, a table cell and an HTML tag are all backslash-escaped."""
    assert escaping.markdown("[a](b) ![c](d) | <i>") == (
        "\\[a\\]\\(b\\) \\!\\[c\\]\\(d\\) \\| \\<i\\>"
    )


def test_markdown_keeps_a_value_on_one_line() -> None:
    """A newline in a value cannot start a new row or heading."""
    assert "\n" not in escaping.markdown("x\n# heading")


@pytest.mark.parametrize("start", ["=", "+", "-", "@"])
def test_csv_neutralises_a_leading_formula_character(start: str) -> None:
    """A cell starting with = + - @ is prefixed with a quote."""
    assert escaping.csv_cell(f"{start}1+1") == f"'{start}1+1"


def test_csv_leaves_other_cells_alone() -> None:
    """Text that starts with a letter is unchanged."""
    assert escaping.csv_cell("ok = fine") == "ok = fine"


def test_csv_escapes_a_leading_tab_instead_of_keeping_it() -> None:
    """OWASP's other two formula starts, tab and CR, are shown as escapes."""
    assert escaping.csv_cell("\t=1") == "\\t=1"
