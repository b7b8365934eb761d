"""`safetynet config check`: a stack file checked offline, then the program run under the
package's mocks and judged by the pack's rules, with the exit-code contract (docs/cli.md)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import unicodedata
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from blob_safetynet.infra.config import KEYS
from tests import tree
from tests.conftest import RunCli
from tests.infra.harness import SWEEPER_SUBNET_ID, run_stack
from tests.policies.test_pack import INFRA_GAPS, INFRA_UNKNOWN

SECRET_URL = "postgresql+psycopg://sweeper:hunter2-canary@db.example.test:5432/documents"
UPLOADER = {"id": "11111111-2222-3333-4444-555555555555", "type": "ServicePrincipal"}


def stack_file(folder: Path, extra: dict[str, Any] | None = None, stack: str = "dev") -> Path:
    """A stack file as `pulumi config set` writes it: the database URL a `secure:` value, a
    provider's key beside this program's, and the zip built beside it."""
    with zipfile.ZipFile(folder / "sweeper-function.zip", "w") as archive:
        archive.writestr("function_app.py", "# stands in for the sweeper's build output\n")
    config: dict[str, Any] = {
        "azure-native:location": "westeurope",
        "blob-safetynet:sweeperDatabaseUrl": {"secure": "v1:bm90IHJlYWxseSBlbmNyeXB0ZWQ="},
        "blob-safetynet:sweeperSubnetId": SWEEPER_SUBNET_ID,
        "blob-safetynet:sweeperPackagePath": "sweeper-function.zip",
        "blob-safetynet:uploaderPrincipalIds": [UPLOADER],
        **{f"blob-safetynet:{key}": value for key, value in (extra or {}).items()},
    }
    path = folder / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"encryptionsalt": "v1:c2FsdA==", "config": config}))
    return path


def test_a_valid_stack_lists_what_it_would_create_and_the_rules_it_passes(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """Exit 0: the configuration is valid, every resource the program registers with the same
    settings is listed, and the rules fail exactly where the pack's own test says the program
    falls short (INFRA_GAPS), Defender being UNKNOWN."""
    code, out, err = run_cli("config", "check", str(stack_file(tmp_path)))
    assert code == 0, err
    assert f"configuration: valid; 4 of {len(KEYS)} keys set" in out
    assert "sweeperDatabaseUrl: a secret" in out
    assert "azure-native:location: another namespace's" in out
    expected = run_stack({"uploaderPrincipalIds": [UPLOADER]})
    section = out[out.index("program under Pulumi mocks") : out.index("rules on")]
    listed = [line.split()[0] for line in section.splitlines() if line.startswith("  azure-")]
    assert sorted(listed) == sorted(
        res.type for res in expected.resources if res.custom and res.type.startswith("azure-")
    )
    verdicts = [line.split()[:2] for line in out.splitlines() if " SN-" in line[:40]]
    assert {rule for outcome, rule in verdicts if outcome == "FAIL"} == set(INFRA_GAPS)
    assert {rule for outcome, rule in verdicts if outcome == "UNKNOWN"} == INFRA_UNKNOWN


def test_fail_on_makes_a_failing_rule_exit_1(tmp_path: Path, run_cli: RunCli) -> None:
    """--fail-on medium: the program's public network access gap fails the check."""
    code, _, err = run_cli("config", "check", str(stack_file(tmp_path)), "--fail-on", "medium")
    assert code == 1
    assert "at or above medium fail" in err


def test_a_typo_names_the_nearest_keys_not_all_of_them(tmp_path: Path, run_cli: RunCli) -> None:
    """Exit 2 with the key and its nearest neighbours, not all the keys."""
    path = stack_file(tmp_path, {"blobSoftDeleteDay": 14})
    code, out, err = run_cli("config", "check", str(path))
    assert code == 2
    assert "blob-safetynet:blobSoftDeleteDay: unknown key; did you mean blobSoftDeleteDays" in err
    named = [key for key in KEYS if key in err.replace("blobSoftDeleteDay:", "")]
    assert len(named) <= 3, named
    assert "program under Pulumi mocks" not in out


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"blobSoftDeleteDays": 0}, "blobSoftDeleteDays: 0 is out of range; allowed: an integer"),
        ({"sweeperDatabaseUrl": SECRET_URL}, "sweeperDatabaseUrl: is stored in plain text"),
        (
            {"alertWebhooks": ["https://hooks.example.test/t0ken"]},
            "alertWebhooks: is stored in plain text",
        ),
        ({"sweeperPackagePath": "missing.zip"}, "build it with `make function-zip`"),
    ],
)
def test_a_value_pulumi_up_would_refuse_is_exit_2(
    tmp_path: Path, run_cli: RunCli, extra: dict[str, Any], words: str
) -> None:
    """Each refusal is the program's own message, exit 2; no secret is printed."""
    code, out, err = run_cli("config", "check", str(stack_file(tmp_path, extra)))
    assert code == 2, out
    assert words in err
    assert "hunter2-canary" not in out + err
    assert "t0ken" not in out + err


def test_a_namespace_one_typo_away_is_refused(tmp_path: Path, run_cli: RunCli) -> None:
    """`blob-safetnet:` keys would not apply to this program: exit 2 naming the right one."""
    path = stack_file(tmp_path)
    text = path.read_text().replace(
        "blob-safetynet:uploaderPrincipalIds", "blob-safetnet:uploaderPrincipalIds"
    )
    path.write_text(text)
    code, _, err = run_cli("config", "check", str(path))
    assert code == 2
    assert "did you mean blob-safetynet:uploaderPrincipalIds" in err


def test_config_only_runs_no_program(tmp_path: Path, run_cli: RunCli) -> None:
    """--config-only validates and stops: exit 0, no resources listed."""
    code, out, _ = run_cli("config", "check", str(stack_file(tmp_path)), "--config-only")
    assert code == 0
    assert "configuration: valid" in out
    assert "program under Pulumi mocks" not in out


def test_the_stack_file_is_found_by_stack_name(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--stack prod reads Pulumi.prod.yaml; with two stack files and no name, exit 2 lists them."""
    stack_file(tmp_path, stack="prod")
    stack_file(tmp_path, stack="dev")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli("config", "check", "--stack", "prod", "--config-only")
    assert code == 0
    assert "(stack prod)" in out
    code, _, err = run_cli("config", "check", "--config-only")
    assert code == 2
    assert "Pulumi.dev.yaml, Pulumi.prod.yaml" in err
    assert run_cli("config", "check", str(tmp_path / "Pulumi.none.yaml"))[0] == 2


def test_without_the_infra_extra_the_configuration_alone_is_checked(tmp_path: Path) -> None:
    """With the Pulumi SDK unimportable the check validates, says the program was not run and
    how to get it, and exits 0."""
    program = (
        "import sys\n"
        "sys.modules['pulumi'] = None\n"
        "from blob_safetynet.cli.main import main\n"
        f"sys.exit(main(['config', 'check', {str(stack_file(tmp_path))!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=tree.environment(),
    )
    assert done.returncode == 0, done.stderr
    assert "configuration: valid" in done.stdout
    assert (
        'program: not run: the Pulumi SDK is not installed (pip install "blob-safetynet[infra]")'
        in done.stdout
    )
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "config",
    [
        {"blob-safetynet:\x1b[2Jx\u202e": 1},
        {"blob-safetynet:location": "west\x1b[31meurope"},
        {"x\nforged:key": 1},
        {"blob-safetynet:containerName": ["not", {"a": "name"}]},
        ["not", "a", "mapping"],
    ],
)
def test_a_hostile_stack_file_is_refused_in_plain_words(
    tmp_path: Path, run_cli: RunCli, config: object
) -> None:
    """Control characters, forged lines and wrong shapes: exit 2, no raw control character,
    no traceback."""
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    code, out, err = run_cli("config", "check", str(path), "--config-only")
    assert code == 2
    assert not [c for c in out + err if unicodedata.category(c) in ("Cc", "Cf") and c != "\n"]
    assert err.count("\n") == 1


@settings(max_examples=25, deadline=None)
@given(st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=30))
def test_any_stack_name_ends_in_the_contract(name: str) -> None:
    """Whatever --stack says: exit 0 or 2, never a traceback (the file rarely exists)."""
    from blob_safetynet.cli.main import main

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = main(["config", "check", "--stack", name, "--config-only"])
    assert code in (0, 2)
    assert "Traceback" not in stderr.getvalue()
