"""One escaping rule per output format, for every value that came from outside.

Account names, blob names, tags, heartbeat fields, ARM fields and exception text are data, not
markup: each format escapes them so none can clear a terminal, forge a row, break a parser, add
a link or run a formula. Markup the tool writes itself (rule ids, titles, table borders) is not
passed through these.
"""

from __future__ import annotations

import string
import unicodedata
from typing import Final

from blob_safetynet.settings.redaction import printable

_XML_ALLOWED_CONTROLS: Final = frozenset("\t\n\r")
_MARKDOWN_SPECIAL: Final = frozenset(string.punctuation)
"""CommonMark lets a backslash escape any ASCII punctuation character, and only those:
https://spec.commonmark.org/0.31.2/#backslash-escapes (GitHub's Markdown is CommonMark)."""
_FORMULA_STARTS: Final = ("=", "+", "-", "@")
"""Leading characters that make a spreadsheet read a cell as a formula (OWASP, CSV Injection:
https://owasp.org/www-community/attacks/CSV_Injection); its other two, tab and carriage return,
never lead a cell here because `printable` escapes them first."""


def terminal(text: str) -> str:
    """Control, format and line-separator characters shown as escapes (`\\x1b`), so a value
    can neither drive the terminal nor start a line of its own."""
    return printable(text)


def _xml_forbidden(char: str) -> bool:
    """Characters outside XML 1.0's `Char` production
    (https://www.w3.org/TR/xml/#charsets), and C1 controls, which it only discourages."""
    code = ord(char)
    if char in _XML_ALLOWED_CONTROLS:
        return False
    if code < 0x20 or 0xD800 <= code <= 0xDFFF or code in (0xFFFE, 0xFFFF):
        return True
    return unicodedata.category(char) == "Cc"


def xml(text: str) -> str:
    """`text` with every character XML 1.0 forbids (and C1 controls) shown as an escape; the
    XML writer escapes `<`, `&` and quotes itself."""
    return "".join(printable(c) if _xml_forbidden(c) else c for c in text)


def markdown(text: str) -> str:
    """`text` as literal Markdown: ASCII punctuation backslash-escaped (no link, image,
    emphasis, table cell or HTML tag can start), then control characters and line breaks
    shown as escapes (no new row or heading)."""
    escaped = "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in text)
    return printable(escaped, backslashes=False)


def csv_cell(text: str) -> str:
    """`text` for a CSV cell: control characters escaped, and a leading formula character
    neutralised with a quote, as OWASP recommends."""
    shown = printable(text)
    return "'" + shown if shown.startswith(_FORMULA_STARTS) else shown
