"""The README's "Use it in your own repository" program is whole: `make adoption` runs it as a
user's infra/__main__.py, so it must stand alone."""

from __future__ import annotations

import ast

from tests.adoption_run import readme_program


def test_the_readme_program_compiles_and_imports_only_what_the_wheel_brings() -> None:
    """It parses, and imports only the standard library, Pulumi, azure-native and the package."""
    tree = ast.parse(readme_program())
    imported = {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    } | {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert imported == {"pathlib", "pulumi", "pulumi_azure_native", "blob_safetynet"}


def test_the_readme_program_builds_the_component_with_its_sweeper() -> None:
    """The block shows the optional sweeper app, the part a team needs the release's zip for."""
    program = readme_program()
    assert "SafetyNetStorage(" in program
    assert "SweeperOptions(" in program
    assert 'Path("sweeper-function.zip")' in program
