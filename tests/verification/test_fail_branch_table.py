"""docs/verification.md lists every FAIL branch of every probe with the test that takes it: a
branch added, reworded or dropped in the code, or a test renamed, makes this red."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from blob_safetynet.policies.probes import PROBES

ROOT = Path(__file__).resolve().parents[2]
PROBE_SOURCES = sorted((ROOT / "blob_safetynet" / "policies" / "probes").glob("*.py"))
SECTION = "## Every FAIL branch and the double that takes it"
ROW = re.compile(r"^\| (SNV-[A-Z-]+) \| `(?P<label>[^`]+)` \| (?P<tests>.+) \|$")
TEST_REF = re.compile(r"`(?P<path>tests/[\w/]+\.py)::(?P<name>\w+)(?:\[(?P<case>[\w-]+)\])?`")


def _label(node: ast.expr) -> str:
    """A detail's text with `…` for each part that varies."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(_label(value) for value in node.values)
    if isinstance(node, ast.BinOp):
        return _label(node.left) + _label(node.right)
    return "…"


def fail_branches() -> Iterator[tuple[str, str]]:
    """(probe id, branch label) for each `failed(...)` in the probes, in source order."""
    ids = {probe.run.__name__: probe.id for probe in PROBES}
    for source in PROBE_SOURCES:
        for function in ast.parse(source.read_text()).body:
            if not isinstance(function, ast.FunctionDef) or function.name not in ids:
                continue
            calls = [
                node
                for node in ast.walk(function)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "failed"
            ]
            for call in sorted(calls, key=lambda c: c.lineno):
                yield ids[function.name], _label(call.args[0])


def documented() -> dict[tuple[str, str], str]:
    """(probe id, branch label) -> the tests cell, from the docs section's table."""
    text = (ROOT / "docs" / "verification.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = (ROW.match(line) for line in section.splitlines())
    return {(m[1], m["label"]): m["tests"] for m in rows if m}


def test_every_fail_branch_is_in_the_table_and_nothing_else() -> None:
    """The table's (probe, branch) rows are exactly the probes' FAIL branches."""
    in_code = list(fail_branches())
    assert len(in_code) == len(set(in_code)), "two FAIL branches of one probe read the same"
    assert sorted(documented()) == sorted(in_code)


def test_every_branch_names_a_test_that_exists() -> None:
    """Each row names at least one test, and each named test (and case id) is in its file."""
    for branch, tests in documented().items():
        references = list(TEST_REF.finditer(tests))
        assert references, branch
        for ref in references:
            source = (ROOT / ref["path"]).read_text()
            assert f"def {ref['name']}(" in source, ref[0]
            assert ref["case"] is None or f'"{ref["case"]}"' in source, ref[0]
