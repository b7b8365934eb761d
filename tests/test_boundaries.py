"""The folders keep the boundaries of the design: no part imports another, rules import no SDK."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("infra", "policies", "sweeper")
SDKS = ("azure", "pulumi", "pulumi_azure_native", "pulumi_policy", "sqlalchemy")
SHARED = ("safetynet.constants", "safetynet.redaction", "sweeper.appsettings")
"""The bottom layer every part may import: the protocol's names, the one redaction path
(the Function, the audit and the CLI must hide secrets the same way) and the settings'
vocabulary (the names the infra program writes are the names the Function reads). All are
standard library only."""


def imported_modules(path: Path) -> set[str]:
    """Dotted names of the absolute imports in one file."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                # `from sweeper import appsettings` imports the module sweeper.appsettings.
                submodule = f"{node.module}.{alias.name}"
                is_module = (ROOT / (submodule.replace(".", "/") + ".py")).is_file()
                modules.add(submodule if is_module else node.module)
    return modules


def imported_roots(path: Path) -> set[str]:
    return {module.split(".")[0] for module in imported_modules(path)}


@pytest.mark.parametrize("part", PARTS)
def test_parts_import_nothing_of_each_other(part: str) -> None:
    """infra/, policies/ and sweeper/ share only the bottom layer (SHARED), never each other."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            {module.split(".")[0] for module in imported_modules(path) - set(SHARED)}
            & (set(PARTS) - {part})
        )
        for path in (ROOT / part).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_parts_take_only_the_shared_modules_from_safetynet() -> None:
    """The only safetynet modules a part may import are the shared constants and redaction."""
    offenders = [
        f"{path.relative_to(ROOT)}: {module}"
        for part in PARTS
        for path in (ROOT / part).rglob("*.py")
        for module in imported_modules(path)
        if module.startswith("safetynet") and module not in SHARED
    ]
    assert offenders == []


def test_rules_and_model_import_no_sdk() -> None:
    """Rules are pure functions over the normalized model: no Azure, Pulumi or database SDK."""
    paths = [ROOT / "policies" / "model.py", *(ROOT / "policies" / "rules").rglob("*.py")]
    offenders = {str(p.relative_to(ROOT)): sorted(imported_roots(p) & set(SDKS)) for p in paths}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_probes_may_use_the_blob_sdk_but_no_other_part() -> None:
    """policies/probes act with the Azure SDK (that is their job) and import no other part, no
    Pulumi and no database."""
    paths = list((ROOT / "policies" / "probes").rglob("*.py"))
    roots = set().union(*(imported_roots(p) for p in paths))
    assert "azure" in roots
    assert roots & (set(SDKS) - {"azure"}) == set()
    assert roots & {"infra", "sweeper"} == set()


def test_rules_and_model_do_not_reach_the_probes() -> None:
    """The SDK-free rules never import the probes, so the SDK cannot leak in through them."""
    paths = [ROOT / "policies" / "model.py", *(ROOT / "policies" / "rules").rglob("*.py")]
    offenders = [
        f"{p.relative_to(ROOT)}: {module}"
        for p in paths
        for module in imported_modules(p)
        if module.startswith("policies.probes") or module.startswith("policies.report")
    ]
    assert offenders == []


def test_shared_modules_import_only_the_standard_library() -> None:
    """The bottom layer stays SDK-free, so importing it never drags a part's dependencies in."""
    offenders = {
        module: sorted(
            imported_roots(ROOT / (module.replace(".", "/") + ".py")) & {*SDKS, *PARTS, "safetynet"}
        )
        for module in SHARED
    }
    assert {k: v for k, v in offenders.items() if v} == {}
