"""The measured import graph of the package, by part: `python -m tests.import_graph`.

Uses the graph `tests/test_boundaries.py` checks (every import, in function bodies and under
TYPE_CHECKING included); prints, per part of `blob_safetynet` (and `testkit`), the parts it
imports with the number of module-to-module edges, then the modules of the blob side and what
each imports there. docs/development.md (Layers) shows its output.
"""

from __future__ import annotations

from collections import Counter

from tests.test_boundaries import BLOB_SIDE, layer_files, project_imports, within

PARTS = (
    "blob_safetynet.cli",
    "testkit",
    "blob_safetynet.embedded",
    "blob_safetynet.function",
    "blob_safetynet.infra",
    "blob_safetynet.policies",
    "blob_safetynet.reconcile",
    *BLOB_SIDE,
)


def part_of(module: str) -> str | None:
    matches = [part for part in PARTS if within(module, part)]
    return max(matches, key=len) if matches else None


def main() -> None:
    edges: Counter[tuple[str, str]] = Counter()
    modules: dict[str, set[str]] = {}
    for path, module in layer_files():
        here = part_of(module)
        for imported in project_imports(path):
            there = part_of(imported)
            if here and there and here != there:
                edges[here, there] += 1
            if here in {*BLOB_SIDE, "blob_safetynet.reconcile"} and there in {
                *BLOB_SIDE,
                "blob_safetynet.reconcile",
            }:
                modules.setdefault(module, set()).add(imported)
    for part in PARTS:
        targets = [f"{there} ({count})" for (here, there), count in edges.items() if here == part]
        print(f"{part} -> {', '.join(sorted(targets)) or '(nothing of the project)'}")
    print()
    for module in sorted(modules):
        inside = sorted(name.removeprefix("blob_safetynet.") for name in modules[module])
        print(f"{module.removeprefix('blob_safetynet.')} -> {', '.join(inside)}")


if __name__ == "__main__":
    main()
