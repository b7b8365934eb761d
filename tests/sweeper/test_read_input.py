"""untrusted.read_input, the one reader of every file an option names."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from blob_safetynet.settings import untrusted


def test_dash_reads_standard_input_within_the_bound() -> None:
    """`-` reads the given standard input, and more than the bound is refused."""
    assert untrusted.read_input("-", "the plan", max_bytes=4, stdin=io.BytesIO(b"[1]")) == b"[1]"
    with pytest.raises(untrusted.UntrustedInputError, match="the plan is larger than 4 bytes"):
        untrusted.read_input("-", "the plan", max_bytes=4, stdin=io.BytesIO(b"[1, 2]"))


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """A FIFO with no writer is refused at once (opening it would otherwise block)."""
    fifo = tmp_path / "plan"
    os.mkfifo(fifo)
    with pytest.raises(untrusted.UntrustedInputError, match=r"not a regular file \(a FIFO\)"):
        untrusted.read_json_file(fifo, "the plan", max_bytes=100)


def test_a_regular_file_is_read_and_parsed(tmp_path: Path) -> None:
    """A regular file within the bound gives its JSON."""
    path = tmp_path / "plan.json"
    path.write_text('{"delete": []}', encoding="utf-8")
    assert untrusted.read_json_file(path, "the plan", max_bytes=100) == {"delete": []}


def test_a_missing_file_says_why(tmp_path: Path) -> None:
    """A missing file is an input error with the system's reason."""
    with pytest.raises(untrusted.UntrustedInputError, match="No such file"):
        untrusted.read_input(tmp_path / "nope", "the plan", max_bytes=100)
