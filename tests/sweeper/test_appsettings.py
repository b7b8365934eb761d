"""One settings vocabulary: one duration grammar, one boolean parser, every name defined once."""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from pathlib import Path

import pytest

from blob_safetynet.settings import appsettings
from blob_safetynet.settings.appsettings import SettingsError, parse_bool, parse_duration
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("blob_safetynet", "infra")
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
YEAR = timedelta(days=365)


@pytest.mark.parametrize(
    ("text", "minimum", "expected"),
    [
        ("90s", SECOND, timedelta(seconds=90)),
        ("15m", SECOND, timedelta(minutes=15)),
        ("2h", SECOND, timedelta(hours=2)),
        ("1d", SECOND, timedelta(days=1)),
        ("1s", SECOND, SECOND),  # the lower bound itself
        ("365d", SECOND, YEAR),  # the upper bound itself
        ("1m", MINUTE, MINUTE),
        ("60s", MINUTE, MINUTE),
        ("015m", SECOND, timedelta(minutes=15)),  # leading zeros are still digits
        (" 15m ", SECOND, timedelta(minutes=15)),
        ("\t2h\n", SECOND, timedelta(hours=2)),
    ],
)
def test_the_grammar_accepts(text: str, minimum: timedelta, expected: timedelta) -> None:
    """Digits and one unit s, m, h or d, within the setting's bounds, give that duration."""
    assert parse_duration(text, minimum=minimum, maximum=YEAR, name="X") == expected


MALFORMED = [
    "",
    "   ",
    "15",
    "m",
    "m15",
    "1.5h",
    "-5m",
    "+5m",
    "15 m",
    "15 minutes",
    "15M",
    "1h30m",
    "1_0m",
    "0x10s",
    "\u0661\u0665m",  # Arabic-Indic digits: int() would take them
    "\uff11\uff15m",  # fullwidth digits
    "15m\x00",
    "15\u200bm",  # a zero-width space
]


@pytest.mark.parametrize("text", MALFORMED)
def test_the_grammar_refuses_malformed_text(text: str) -> None:
    """Anything but ASCII digits and one lowercase unit is not a duration, naming the setting."""
    with pytest.raises(SettingsError, match=r"^SAFETYNET_CUTOFF: '.*' is not a duration; ") as e:
        parse_duration(text, minimum=SECOND, maximum=YEAR, name="SAFETYNET_CUTOFF")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("text", "minimum", "allowed"),
    [
        ("0s", SECOND, "1s to 365d"),
        ("366d", SECOND, "1s to 365d"),
        ("8761h", SECOND, "1s to 365d"),
        ("59s", MINUTE, "1m to 365d"),
        ("9" * 13 + "s", SECOND, "1s to 365d"),
        ("9" * 5000 + "d", SECOND, "1s to 365d"),  # int() of it would raise ValueError
    ],
)
def test_the_bounds_are_the_settings(text: str, minimum: timedelta, allowed: str) -> None:
    """Out of the setting's bounds is an error quoting those bounds, also for huge numbers."""
    with pytest.raises(SettingsError, match=f"is out of range; allowed {allowed}$") as caught:
        parse_duration(text, minimum=minimum, maximum=YEAR, name="sweeperCutoff")
    assert caught.value.problem == str(caught.value).removeprefix("sweeperCutoff: ")
    assert len(str(caught.value)) < 120


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("false", False), ("TRUE", True), ("False", False), (" true\n", True)],
)
def test_the_boolean_parser_accepts_true_and_false(text: str, expected: bool) -> None:
    """`true` and `false` in any case, surrounding whitespace ignored."""
    assert parse_bool(text, name="SAFETYNET_LEASE") is expected


@pytest.mark.parametrize(
    "text", ["", "yes", "no", "1", "0", "on", "off", "t", "truee", "true false", "\uff54rue"]
)
def test_the_boolean_parser_refuses_everything_else(text: str) -> None:
    """Other spellings are errors naming the setting, never a silent false."""
    with pytest.raises(SettingsError, match=r"^SAFETYNET_LEASE: '.*' is not a boolean; use true"):
        parse_bool(text, name="SAFETYNET_LEASE")


@pytest.mark.parametrize("name", appsettings.SECRET_NAMES)
def test_errors_never_show_a_secret_settings_value(name: str) -> None:
    """A value given for a URL, connection string or token setting is never in the message."""
    value = "postgresql://sweeper:hunter2@db/documents"
    for parse in (
        lambda: parse_bool(value, name=name),
        lambda: parse_duration(value, minimum=SECOND, maximum=YEAR, name=name),
    ):
        with pytest.raises(SettingsError) as caught:
            parse()
        assert "hunter2" not in str(caught.value)
        assert str(caught.value).startswith(f"{name}: the value ")


def test_a_shown_value_is_escaped_and_cut_short() -> None:
    """A newline cannot forge a second line, and a pasted page does not become the message."""
    with pytest.raises(SettingsError) as caught:
        parse_bool("yes\nforged" + "x" * 500, name="--lease")
    message = str(caught.value)
    assert message.startswith("--lease: 'yes\\nforged")
    assert "\n" not in message
    assert len(message) < 120


def test_every_name_is_defined_once() -> None:
    """No two settings share a name, and every default parses as its kind."""
    names = [setting.name for setting in appsettings.SETTINGS]
    assert len(names) == len(set(names))
    for setting in appsettings.SETTINGS:
        if setting.minimum is not None and setting.default is not None:
            setting.duration(setting.default)
    for setting in (appsettings.LEASE, appsettings.ALLOW_CUSTOM_ENDPOINT):
        assert setting.boolean(str(setting.default)) is False


def test_the_loader_defaults_are_the_settings_defaults() -> None:
    """SweepSettings' defaults and the shared container name are what the vocabulary says."""
    defaults = SweepSettings()
    assert defaults.cutoff == appsettings.CUTOFF.duration(str(appsettings.CUTOFF.default))
    grace = appsettings.RETIRED_GRACE
    assert defaults.retired_grace == grace.duration(str(grace.default))
    assert defaults.use_lease is appsettings.LEASE.boolean(str(appsettings.LEASE.default))
    assert defaults.container == appsettings.CONTAINER.default == DEFAULT_CONTAINER
    assert int(str(appsettings.CONCURRENCY.default)) == defaults.concurrency


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function, attribute)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def strings_naming_settings(paths: list[Path]) -> list[str]:
    """`path:line: text` of each string literal (docstrings aside) that spells a setting's name."""
    names = "|".join(re.escape(setting.name) for setting in appsettings.SETTINGS)
    spelled = re.compile(rf"(?<![A-Za-z0-9_])(?:{names})(?![A-Za-z0-9_])")
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and spelled.search(node.value)
            ):
                found.append(f"{path}:{node.lineno}: {node.value!r}")
    return found


def test_the_product_spells_no_setting_name_outside_the_vocabulary() -> None:
    """Outside blob_safetynet/settings/appsettings.py no string literal (a help text or message included) holds a
    setting's name: code says `appsettings.CUTOFF.name`, so a rename cannot leave one behind."""
    paths = [
        path
        for part in PRODUCT
        for path in sorted((ROOT / part).rglob("*.py"))
        if path != ROOT / "blob_safetynet" / "settings" / "appsettings.py"
    ]
    assert strings_naming_settings(paths) == []


def test_the_spelling_check_finds_a_literal(tmp_path: Path) -> None:
    """The check above fails for a literal name and a help text, not for a docstring."""
    module = tmp_path / "module.py"
    module.write_text(
        '"""Reads SAFETYNET_CUTOFF."""\n'
        'CUTOFF = "SAFETYNET_CUTOFF"\n'
        'HELP = "(env SAFETYNET_LEASE=true|false)"\n'
        'OTHER = "SAFETYNET_CUTOFF_X"\n',
        encoding="utf-8",
    )
    assert [line.split(": ")[0] for line in strings_naming_settings([module])] == [
        f"{module}:2",
        f"{module}:3",
    ]


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FUNCTION_TABLE = "| setting | required | default | meaning |"
CLI_TABLE = "| option | env | default | meaning |"


def doc_tables(header: str) -> list[list[list[str]]]:
    """Every markdown table under `header` in the README and docs/, as rows of cells."""
    tables = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for start, line in enumerate(lines):
            if line.strip() != header:
                continue
            rows = []
            for row in lines[start + 2 :]:
                if not row.startswith("|"):
                    break
                cells = re.split(r"(?<!\\)\|", row.strip().removeprefix("|").removesuffix("|"))
                rows.append([cell.strip() for cell in cells])
            tables.append(rows)
    return tables


def documented_default(cell: str) -> str | None:
    """`15m` -> 15m; an empty cell or `(required)` -> None."""
    return cell.strip("`") if cell.startswith("`") else None


def test_the_function_settings_table_is_the_vocabulary() -> None:
    """The documented app settings are exactly the Function's settings, with their defaults."""
    tables = doc_tables(FUNCTION_TABLE)
    assert tables, f"no table headed {FUNCTION_TABLE!r} in README.md or docs/"
    expected = {setting.name: setting.default for setting in appsettings.FUNCTION_SETTINGS}
    for rows in tables:
        documented = {row[0].strip("`"): documented_default(row[2]) for row in rows}
        assert documented == expected


def test_the_cli_options_table_names_settings_with_their_defaults() -> None:
    """Each environment variable in the options table is a setting, with the setting's default."""
    tables = doc_tables(CLI_TABLE)
    assert tables, f"no table headed {CLI_TABLE!r} in README.md or docs/"
    by_name = {setting.name: setting for setting in appsettings.SETTINGS}
    for rows in tables:
        for row in rows:
            if not row[1]:
                continue  # an option without a variable (--dry-run, --json)
            setting = by_name[row[1].strip("`")]
            assert documented_default(row[2]) == setting.default, row
