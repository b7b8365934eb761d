"""`python -m blob_safetynet.policies.pack.config` writes only what the pack's own config schema accepts."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from blob_safetynet.policies.pack.config import config_values, main, schema_problems
from blob_safetynet.policies.pack.crossguard import CONFIG_SCHEMA
from blob_safetynet.policies.rules.model import Thresholds

SCHEMA = {"type": "object", "properties": CONFIG_SCHEMA.properties}


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (["--container", "ab"], "containerName"),
        (["--container", "x" * 64], "containerName"),
        (["--max-pending-days", "366"], "maxPendingDays"),
        (["--max-pending-days", "0"], "maxPendingDays"),
        (["--min-blob-soft-delete-days", "100000"], "minBlobSoftDeleteDays"),
        (["--min-container-soft-delete-days", "366"], "minContainerSoftDeleteDays"),
        (["--min-container-soft-delete-days", "0"], "minContainerSoftDeleteDays"),
    ],
)
def test_values_the_schema_rejects_exit_2_naming_the_key(
    argv: list[str], key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A threshold outside the schema's bounds is refused (exit 2) and nothing is printed."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    assert exited.value.code == 2
    assert key in err
    assert out == ""


def test_what_it_writes_passes_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """Every policy's entry in the default config file validates against the schema."""
    assert main(["--deployment-principal", "ci"]) == 0
    for entry in json.loads(capsys.readouterr().out).values():
        jsonschema.validate(entry, SCHEMA)


CORPUS: list[dict[str, Any]] = [
    config_values(Thresholds()),
    {"maxPendingDays": 365, "minBlobSoftDeleteDays": 1},
    {"minContainerSoftDeleteDays": 365},
    {"minContainerSoftDeleteDays": 366},
    {"maxPendingDays": 366},
    {"maxPendingDays": True},
    {"maxPendingDays": 2.5},
    {"containerName": "abc"},
    {"containerName": "ab"},
    {"containerName": "é" * 63},
    {"containerName": 7},
    {"deploymentPrincipalIds": ["a", "b"]},
    {"deploymentPrincipalIds": ["a", 1]},
    {"deploymentPrincipalIds": "a"},
    {"unknown": 1},
]


@pytest.mark.parametrize("values", CORPUS)
def test_the_check_agrees_with_a_json_schema_validator(values: dict[str, Any]) -> None:
    """schema_problems accepts exactly what jsonschema accepts (unknown keys aside, which the
    pack's schema allows but no threshold uses)."""
    known = {k: v for k, v in values.items() if k in CONFIG_SCHEMA.properties}
    assert (not schema_problems(known, CONFIG_SCHEMA)) == jsonschema.Draft7Validator(
        SCHEMA
    ).is_valid(known)
    if known != values:
        assert schema_problems(values, CONFIG_SCHEMA)
