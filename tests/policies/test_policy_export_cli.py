"""`safetynet policy export --format azure-policy DIR`: valid files, or exit 2 and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from blob_safetynet.cli.main import main
from blob_safetynet.policies.governance import export, forms

DATA = Path(__file__).parent / "data"
SCOPE = "/subscriptions/00000000-0000-0000-0000-00000000a0d1"


def export_to(folder: Path, *extra: str, scope: str = SCOPE) -> int:
    return main(
        ["policy", "export", "--format", "azure-policy", "--scope", scope, *extra, str(folder)]
    )


def test_export_writes_every_definition_the_initiative_and_the_reasons(tmp_path: Path) -> None:
    """Exit 0; one definition file per exported rule, each valid, and the initiative naming
    them under the given scope."""
    folder = tmp_path / "policy"
    assert export_to(folder) == 0
    schema = json.loads((DATA / "azure-policy-definition.schema.json").read_text())
    names = sorted(path.name for path in (folder / "definitions").iterdir())
    assert names == sorted(f"{export.definition_name(f)}.json" for f in forms.FORMS)
    for path in (folder / "definitions").iterdir():
        jsonschema.validate(json.loads(path.read_text()), schema)
    initiative = json.loads((folder / "initiative.json").read_text())
    assert initiative == export.initiative(SCOPE)
    reasons = json.loads((folder / "not-expressible.json").read_text())
    assert {item["rule"] for item in reasons} == {i.rule.id for i in forms.NOT_EXPRESSIBLE}
    used = json.loads((folder / "aliases.json").read_text())
    assert {item["alias"] for item in used} == {a.name for f in forms.FORMS for a in f.aliases}


def test_running_again_over_an_earlier_export_rewrites_it(tmp_path: Path) -> None:
    """An existing export folder is rewritten in place, to the same files."""
    assert export_to(tmp_path) == 0
    first = (tmp_path / "initiative.json").read_text()
    assert export_to(tmp_path) == 0
    assert (tmp_path / "initiative.json").read_text() == first


MANAGEMENT_GROUPS = "/providers/Microsoft.Management/managementGroups/"


@pytest.mark.parametrize(
    "scope",
    [
        "/subscriptions/not-a-guid",
        MANAGEMENT_GROUPS,
        "x",
        f"{SCOPE}/resourceGroups/x",
        f"{SCOPE}/",
        f"{MANAGEMENT_GROUPS}mg/subscriptions/x",
        f"{MANAGEMENT_GROUPS}..",
        f"{MANAGEMENT_GROUPS}.",
        f"{MANAGEMENT_GROUPS}landing-zones.",
        f"{MANAGEMENT_GROUPS}{'m' * 91}",
        "/\u017fubscriptions/00000000-0000-0000-0000-00000000a0d1",
        f"{MANAGEMENT_GROUPS}\u212aelvin",
        "/providers/Micro\u017foft.Management/managementGroups/mg",
    ],
)
def test_a_scope_that_cannot_hold_definitions_exits_two_and_writes_nothing(
    tmp_path: Path, scope: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scope neither a subscription nor a management group is a usage error, named as such."""
    folder = tmp_path / "out"
    assert export_to(folder, scope=scope) == 2
    assert not folder.exists()
    assert "--scope" in capsys.readouterr().err


@pytest.mark.parametrize(
    "scope",
    [
        "/SUBSCRIPTIONS/00000000-0000-0000-0000-00000000A0D1",
        f"{MANAGEMENT_GROUPS}landing-zones",
        f"{MANAGEMENT_GROUPS}Contoso_(Prod).eu",
        f"{MANAGEMENT_GROUPS}{'m' * 90}",
        "/providers/microsoft.management/managementgroups/a",
    ],
)
def test_a_subscription_or_a_management_group_as_azure_allows_it_is_a_scope(
    tmp_path: Path, scope: str
) -> None:
    """A subscription (any case) or a management group id of 1-90 ASCII letters, digits, `-`,
    `_`, `(`, `)` and `.`, not ending with a period, is a scope."""
    assert export_to(tmp_path / "out", scope=scope) == 0


def test_a_dir_that_is_a_file_or_under_a_missing_folder_exits_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DIR must be a folder or a new one in an existing folder; otherwise exit 2 with why."""
    afile = tmp_path / "afile"
    afile.write_text("keep")
    assert export_to(afile) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert afile.read_text() == "keep"
    assert export_to(tmp_path / "missing" / "out") == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["", " ", "a\x00b"])
def test_a_dir_that_names_no_folder_exits_two_and_writes_nothing(
    tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty, blank or NUL-holding DIR is refused, not read as the current folder."""
    monkeypatch.chdir(tmp_path)
    assert main(["policy", "export", "--format", "azure-policy", "--scope", SCOPE, text]) == 2
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    """Only azure-policy is a format; another exits 2."""
    code = main(["policy", "export", "--format", "bicep", "--scope", SCOPE, str(tmp_path)])
    assert code == 2


def test_a_definitions_folder_that_is_a_link_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DIR/definitions a symbolic link to a folder elsewhere: exit 2 naming the link, nothing
    written where it points."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = tmp_path / "policy"
    folder.mkdir()
    (folder / "definitions").symlink_to(elsewhere, target_is_directory=True)
    assert export_to(folder) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []
