"""docs/glossary.md defines the project's terms, and its picture of the states is a fresh run's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED
from blob_safetynet.store.tables import BlobRecordKind, Status
from testkit.states import GLOSSARY, observe, render, section_of

TERMS = ("pending", "sealed", "retired", "intent", "binding", "canary", "cutoff", "grace")


def defined_terms() -> set[str]:
    text = GLOSSARY.read_text(encoding="utf-8")
    return {term.lower() for term in re.findall(r"^\*\*([^*]+)\*\*", text, re.MULTILINE)} | {
        term.lower() for term in re.findall(r"\*\*([^*]+)\*\*", text)
    }


def test_the_states_section_is_what_the_protocol_and_the_sweeper_do(
    service_client: BlobServiceClient, tmp_path: Path
) -> None:
    """Regenerated from a run on Azurite + SQLite: `python -m testkit.states` when this fails."""
    assert section_of(GLOSSARY) == render(observe(service_client, tmp_path))


@pytest.mark.parametrize("term", TERMS)
def test_each_term_of_the_issue_is_defined(term: str) -> None:
    """Every term the docs lean on has a bolded entry of its own."""
    assert any(term in defined for defined in defined_terms())


def test_every_status_tag_and_record_kind_of_the_code_is_defined() -> None:
    """A new status, tag value or record kind in the code needs a glossary entry."""
    words = {s.value.lower() for s in Status} | {COMMITTED, PENDING, RETIRED}
    words |= {k.value for k in BlobRecordKind}
    assert words <= {w for d in defined_terms() for w in re.split(r"[ ,()]+", d)}
