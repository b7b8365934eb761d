"""One escaping rule per output format, for every value that came from outside.

Account names, blob names, tags, heartbeat fields, ARM fields and exception text are data, not
markup: each format escapes them so none can clear a terminal, forge a row, break a parser, add
a link or run a formula. Markup the tool writes itself (rule ids, titles, table borders) is not
passed through these.
"""

from __future__ import annotations

import re
import string
from typing import Final

from blob_safetynet.settings.redaction import printable

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


def xml(text: str) -> str:
    """`text` for an XML attribute or element: the terminal's escaping, so control, format
    (U+202E included) and line-break characters, tab too, come out as visible escapes, as in
    every other format; what XML 1.0 forbids (https://www.w3.org/TR/xml/#charsets) is among
    them. The XML writer escapes `<`, `&` and quotes itself. A CI page shows a JUnit message
    as text, so a raw CR, LF or bidi override would forge or reorder its lines."""
    return printable(text)


def markdown(text: str) -> str:
    """`text` as literal Markdown: ASCII punctuation backslash-escaped (no link, image,
    emphasis, table cell or HTML tag can start), then control characters and line breaks
    shown as escapes (no new row or heading)."""
    escaped = "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in text)
    return printable(escaped, backslashes=False)


_CODE_SPAN: Final = re.compile(r"`([^`]+)`")


def markdown_keeping_code(text: str) -> str:
    """The tool's own text (a rule's title or remediation, never a value from outside) as
    Markdown whose code spans stay code spans: the text between them escaped as `markdown`,
    each span kept with its `|` escaped, which a GitHub table cell needs even inside a code
    span (https://github.github.com/gfm/#tables-extension-)."""
    parts = []
    last = 0
    for span in _CODE_SPAN.finditer(text):
        parts.append(markdown(text[last : span.start()]))
        code = printable(span.group(1), backslashes=False).replace("|", "\\|")
        parts.append(f"`{code}`")
        last = span.end()
    parts.append(markdown(text[last:]))
    return "".join(parts)


def csv_cell(text: str) -> str:
    """`text` for a CSV cell: control characters escaped, and a leading formula character
    neutralised with a quote, as OWASP recommends."""
    shown = printable(text)
    return "'" + shown if shown.startswith(_FORMULA_STARTS) else shown
