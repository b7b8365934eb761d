"""The hostile corpus every report format is tested with: text an attacker can place in ARM
fields, container or blob names, tags, heartbeat fields and error bodies."""

from __future__ import annotations

import unicodedata
from typing import Final

CORPUS: Final = (
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b]0;pwned\x07",  # set the window title
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",  # terminal hyperlink
    "x\rgood      SN-SHARED-KEY-OFF  high  PASS  forged",  # overwrite a row
    "x\ngood      SN-SHARED-KEY-OFF  high  PASS  forged",  # add a row
    "nul\x00 bs\x08 del\x7f nel\x85 ls\u2028 rlo\u202e",  # control and format characters
    "[click here](https://evil.example/) ![img](https://evil.example/p.png)",  # Markdown
    "| a | b |\n|---|---|",  # a Markdown table of its own
    "</script><script>alert(1)</script><img src=x onerror=alert(2)>",  # HTML
    "]]><!-- &amp; &#0;",  # XML breakers
    '=HYPERLINK("https://evil.example/","x")',  # CSV formula
    "+1+2",
    "-1+2",
    "@SUM(A1:A2)",
)

FORBIDDEN_IN_XML: Final = frozenset(chr(c) for c in range(0x20) if chr(c) not in "\t\n\r")


def raw_controls(text: str, allowed: str = "\n") -> list[str]:
    """Control, format and line-separator characters in `text` other than `allowed`."""
    return sorted(
        {
            c
            for c in text
            if c not in allowed
            and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")
            and c != "\ufeff"
        }
    )
