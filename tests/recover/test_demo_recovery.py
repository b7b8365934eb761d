"""The demo's recovery story (`safetynet demo`, R1-R9), run alone on the recovery double: every
document deleted or overwritten behind the protocol comes back with its row's bytes."""

from __future__ import annotations

from pathlib import Path

from azure.storage.blob import BlobServiceClient

from blob_safetynet.cli.demo import Scenario
from blob_safetynet.cli.demo_recovery import recovery_story
from blob_safetynet.embedded.azurite import Azurite


def test_every_step_of_the_recovery_story_measures_what_it_expects(
    azurite: Azurite, tmp_path: Path
) -> None:
    """R1 (Azurite's 501) to R9 (a deleted container restored) each measure their expected
    outcome: the deletes and overwrites are planned, restored and their bytes match."""
    service = BlobServiceClient.from_connection_string(azurite.connection_string)

    steps = [Scenario(*step) for step in recovery_story(azurite.port, service, tmp_path)]

    assert [s.id for s in steps] == [f"R{n}" for n in range(1, 10)]
    assert [(s.id, s.measured) for s in steps if not s.ok] == []
