"""Issue 24: `safetynet verify` through the double that evaluates x-ms-if-tags as Azure does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite
from testkit.service_doubles import tag_guarding_service
from tests.verification.conftest import ProbeTarget

pytestmark = [pytest.mark.verification, pytest.mark.usefixtures("emulator_only")]


def seal_outcome(connection_string: str, container: str, output: Path) -> str:
    main(
        [
            "verify",
            "--connection-string",
            connection_string,
            "--container",
            container,
            "--format",
            "json",
            "--output",
            str(output),
        ]
    )
    checks = json.loads(output.read_text())["checks"]
    return str(next(c["outcome"] for c in checks if c["check"] == "SNV-CONDITIONAL-SEAL"))


def test_verify_through_the_enforcing_double_passes_the_conditional_seal(
    azurite: Azurite, key_target: ProbeTarget, tmp_path: Path
) -> None:
    """The double refuses the seal of a retired blob with 412: PASS; Azurite alone cannot show it."""
    with tag_guarding_service(azurite.port) as service:
        through = seal_outcome(service.connection_string, key_target.container, tmp_path / "a")
    alone = seal_outcome(azurite.connection_string, key_target.container, tmp_path / "b")
    assert (through, alone) == ("PASS", "NOT_VERIFIABLE")
