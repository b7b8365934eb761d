"""Every process a test starts runs the tree under test (tests/tree.py), never the venv's
install of another copy: whichever way the child is started, it imports `blob_safetynet` from
`tree.TREE`, and a child that would import another copy is stopped before it runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import tree

PRINT_FILE = "import blob_safetynet; print(blob_safetynet.__file__)"
NO_PROJECT_CODE = {
    "tests/adoption_run.py": "installs the wheel built from the tree in fresh venvs, on purpose",
    "tests/function/test_function_zip.py": "runs the zip built from the tree, isolated (-I)",
    "tests/mutation_file.py": "runs mutmut and pytest over the mutants copy it made",
    "tests/mutation_rejudge.py": "runs pytest over the mutants copy",
    "tests/mutation_run.py": "runs mutmut",
    "tests/policies/test_report_html.py": "runs a headless Chromium",
    "tests/soak_run.py": "runs pytest in the tree with PYTHONPATH set to it",
    "tests/test_action.py": "runs check-jsonschema and actionlint; its steps go through ci_steps",
    "tests/test_packaging.py": "runs `uv build` of the tree",
}
"""The modules that start processes without `tree.environment()`, and why that is right."""
STARTS_A_PROCESS = re.compile(r"subprocess\.(?:run|Popen|check_output|call|check_call)\(")


def child_imports(command: list[str], cwd: Path) -> Path:
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=cwd,
        env=tree.environment(),
    )
    return Path(done.stdout.strip().splitlines()[-1]).resolve()


@pytest.mark.parametrize("how", ["console script", "-m from the tree", "-c elsewhere", "script"])
def test_a_child_started_with_the_trees_environment_imports_the_tree(
    tmp_path: Path, how: str
) -> None:
    """The console script's wrapper, `python -m`, `python -c` and a script file started from
    another folder each import `blob_safetynet` from the tree this test process imported."""
    script = tmp_path / "show.py"
    script.write_text(PRINT_FILE + "\n")
    commands = {
        "console script": ([str(tree.CONSOLE_SCRIPT), "--version"], tmp_path),
        "-m from the tree": ([*tree.MODULE, "--version"], tree.TREE),
        "-c elsewhere": ([sys.executable, "-c", PRINT_FILE], tmp_path),
        "script": ([sys.executable, str(script)], tmp_path),
    }
    command, cwd = commands[how]
    if how in ("console script", "-m from the tree"):
        hook = tmp_path / "hook"
        hook.mkdir()
        (hook / "show_tree.py").write_text(
            "import blob_safetynet, sys\nsys.stderr.write(blob_safetynet.__file__ + '\\n')\n"
        )
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            cwd=cwd,
            env=tree.environment(path=[hook], hooks=["show_tree"]),
        )
        imported = Path(done.stderr.splitlines()[0]).resolve()
    else:
        imported = child_imports(command, cwd)
    assert imported == tree.TREE / "blob_safetynet" / "__init__.py"


def test_a_child_that_would_import_another_copy_is_stopped(tmp_path: Path) -> None:
    """A child whose working folder holds another `blob_safetynet` (first on its sys.path)
    exits 97 naming both copies, before a line of the other copy runs."""
    other = tmp_path / "blob_safetynet"
    other.mkdir()
    (other / "__init__.py").write_text("print('the other copy ran')\n")

    done = subprocess.run(
        [sys.executable, "-c", "import blob_safetynet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=tmp_path,
        env=tree.environment(),
    )

    assert done.returncode == tree.WRONG_TREE
    assert str(other) in done.stderr
    assert str(tree.TREE) in done.stderr
    assert "the other copy ran" not in done.stdout


def test_every_module_that_starts_a_process_runs_the_tree() -> None:
    """Each module of tests/ that starts a process builds its environment with
    `tree.environment()`, or is listed with the reason it runs no other copy of the package."""
    starting = {
        path.relative_to(tree.TREE).as_posix()
        for path in (tree.TREE / "tests").rglob("*.py")
        if STARTS_A_PROCESS.search(path.read_text(encoding="utf-8"))
    }
    unguarded = {
        name
        for name in starting
        if "tree.environment(" not in (tree.TREE / name).read_text(encoding="utf-8")
    }
    assert unguarded - NO_PROJECT_CODE.keys() == set()
    assert NO_PROJECT_CODE.keys() <= starting
