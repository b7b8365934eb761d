"""The states a document passes through, observed by running the real protocol and sweeper.

`observe` puts, replaces and deletes a document on a real blob service and a SQLite file,
abandons a second upload, then sweeps a day later; after every protocol step (its checkpoint)
and every sweep it records the row's status, each blob's `state` tag and the crash-window
records. `render` turns that into the table and the Mermaid diagram in docs/glossary.md, and
tests/test_glossary.py checks the page against a fresh run, so the picture cannot drift from
the code. `python -m testkit.states` rewrites the page's section.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import PROJECT_ROOT, Azurite, create_unique_container
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper.sweep import Sweeper

GLOSSARY = PROJECT_ROOT / "docs" / "glossary.md"
BEGIN, END = "<!-- states:begin -->", "<!-- states:end -->"
NONE = "-"
CRASHED = "another upload: a crash after its upload"


@dataclass(frozen=True)
class Observation:
    after: str
    row: str
    """The row's status, or `-` when there is no row."""
    tags: tuple[str, ...]
    """Each blob's state tag (`untagged`, `-` when absent), blobs in order of appearance."""
    records: str
    """The crash-window records naming the document's blobs, e.g. `intent(B)`."""

    @property
    def state(self) -> str:
        """The diagram's label: row, tags, records; one label for nothing left at all."""
        if self.row == NONE and not self.records and all(t.endswith(NONE) for t in self.tags):
            return "nothing left: no row, no blob, no record"
        row = "no row" if self.row == NONE else self.row
        return f"{row} / {' '.join(self.tags)}" + (f" / {self.records}" if self.records else "")


class _Watcher:
    """Snapshots one document's row, blobs and records whenever asked."""

    def __init__(self, store: DocumentStore, container: ContainerClient, name: str) -> None:
        self.store = store
        self.container = container
        self.name = name
        self.blobs: list[str] = []
        self.seen: list[Observation] = []
        self.document_id: str | None = None

    def _letter(self, blob_name: str) -> str:
        return chr(ord("A") + self.blobs.index(blob_name))

    def __call__(self, after: str) -> None:
        row = self.store.get_by_name(self.name) or (
            self.store.get(self.document_id) if self.document_id else None
        )
        if row is not None:
            self.document_id = row.id
            if row.blob_name not in self.blobs:
                self.blobs.append(row.blob_name)
        records = [r for r in self.store.records() if r.document_id == self.document_id]
        for record in records:
            if record.blob_name not in self.blobs:
                self.blobs.append(record.blob_name)
        status = f"{row.status} on {self._letter(row.blob_name)}" if row else NONE
        tags = tuple(self._tag(name) for name in self.blobs)
        listed = ", ".join(f"{r.kind}({self._letter(r.blob_name)})" for r in records)
        self.seen.append(Observation(after, status, tags, listed))

    def _tag(self, blob_name: str) -> str:
        state = blobs.state_of(self.container.get_blob_client(blob_name))
        letter = self._letter(blob_name)
        if state is None:
            return f"{letter}:{NONE}"
        return f"{letter}:{state or 'untagged'}"


def observe(service: BlobServiceClient, folder: Path) -> list[Observation]:
    """Run put, replace, delete, an abandoned upload and a sweep a day later; every state."""
    store = DocumentStore.from_url(f"sqlite:///{folder / 'states.db'}")
    store.init_schema()
    container = create_unique_container(service, "states")
    try:
        return _scenario(store, container, "invoice") + _abandoned(store, container)
    finally:
        container.delete_container()
        store.engine.dispose()


def _sweep_a_day_later(store: DocumentStore, container: ContainerClient) -> None:
    later = datetime.now(UTC) + timedelta(days=1)
    settings = SweepSettings(container=container.container_name)
    Sweeper(store, container, settings, clock=lambda: later).run()


def _scenario(store: DocumentStore, container: ContainerClient, name: str) -> list[Observation]:
    watch = _Watcher(store, container, name)
    protocol = UploadProtocol(store, container, checkpoint=lambda step: watch(f"put: {step}"))
    document = protocol.put(name, b"v1", ".pdf")
    protocol.checkpoint = lambda step: watch(step.replace(".", ": "))
    protocol.replace(document.id, b"v2", ".pdf")
    protocol.delete(document.id)
    _sweep_a_day_later(store, container)
    watch("sweep, a day later")
    return watch.seen


def _abandoned(store: DocumentStore, container: ContainerClient) -> list[Observation]:
    watch = _Watcher(store, container, "abandoned")
    protocol = UploadProtocol(store, container)
    protocol.upload(protocol.reserve("abandoned", ".pdf"), b"never sealed")
    watch(CRASHED)
    _sweep_a_day_later(store, container)
    watch("sweep, a day later")
    return watch.seen


def render(observations: list[Observation]) -> str:
    """The Markdown table of every observed state, and a Mermaid diagram of the transitions."""
    width = max(len(o.tags) for o in observations)
    head = " | ".join(f"blob {chr(ord('A') + i)}" for i in range(width))
    lines = [
        f"| after | row | {head} | records |",
        f"| --- | --- | {' | '.join(['---'] * width)} | --- |",
    ]
    for o in observations:
        cells = [tag.split(":", 1)[1] for tag in o.tags] + [""] * (width - len(o.tags))
        lines.append(f"| {o.after} | {o.row} | {' | '.join(cells)} | {o.records or NONE} |")
    return "\n".join([*lines, "", *_mermaid(observations)])


def _mermaid(observations: list[Observation]) -> list[str]:
    ids: dict[str, str] = {}
    lines = ["```mermaid", "stateDiagram-v2"]
    previous = "[*]"
    for o in observations:
        if o.after == CRASHED:
            previous = "[*]"
        if o.state not in ids:
            ids[o.state] = f"s{len(ids)}"
            lines.append(f'    state "{o.state}" as {ids[o.state]}')
        lines.append(f"    {previous} --> {ids[o.state]}: {o.after}")
        previous = ids[o.state]
    return [*lines, "```"]


def write(page: Path, section: str) -> None:
    text = page.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    page.write_text(f"{text[:start]}\n{section}\n{text[end:]}", encoding="utf-8")


def section_of(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()


def main() -> int:
    with Azurite() as azurite, tempfile.TemporaryDirectory() as folder:
        service = BlobServiceClient.from_connection_string(azurite.connection_string)
        write(GLOSSARY, render(observe(service, Path(folder))))
    print(f"wrote the states section of {GLOSSARY}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
