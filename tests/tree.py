"""The tree under test, for every test that starts a Python process of the project.

A child process imports `blob_safetynet` from the first entry of its sys.path that holds it:
without help, the venv's editable install, which is not the tree the tests were collected
from under mutation testing (tests/mutation_file.py puts mutants/ on PYTHONPATH) or from
another checkout. Every subprocess test builds its child's environment with `environment()`:
PYTHONPATH starts with the guard folder and the tree this process imported, and the guard's
`sitecustomize` ends a child about to import `blob_safetynet` from anywhere else (exit 97, one
line naming both), so no subprocess test can pass on another copy of the package.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import blob_safetynet

TREE = Path(blob_safetynet.__file__).resolve().parent.parent
"""The root of the tree this test process imports `blob_safetynet` from."""
GUARD = Path(__file__).resolve().parent / "tree_guard"
TREE_VARIABLE = "TESTS_TREE_UNDER_TEST"
HOOKS_VARIABLE = "TESTS_CHILD_HOOKS"
WRONG_TREE = 97
"""The guard's exit code for a child that would import another copy of the package."""
CONSOLE_SCRIPT = Path(sys.executable).parent / "safetynet"
"""The installer's wrapper of the [project.scripts] entry: with `environment()` it imports this
tree's `blob_safetynet.cli.main`."""
MODULE = (sys.executable, "-m", "blob_safetynet.cli.main")
"""The console script's module run as a program (`python -m`), from `TREE` with `environment()`."""


def environment(
    base: Mapping[str, str] | None = None,
    *,
    path: Sequence[Path | str] = (),
    hooks: Sequence[str] = (),
) -> dict[str, str]:
    """`base` (default os.environ) for a child that runs the tree under test: PYTHONPATH is the
    guard, `path`, `TREE`, then what it held; `hooks` are modules (found on `path`) the child
    imports at start-up, after the guard."""
    env = dict(os.environ if base is None else base)
    held = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    entries = [str(GUARD), *(str(entry) for entry in path), str(TREE), *held]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(entries))
    env[TREE_VARIABLE] = str(TREE)
    env.pop(HOOKS_VARIABLE, None)
    if hooks:
        env[HOOKS_VARIABLE] = ",".join(hooks)
    return env
