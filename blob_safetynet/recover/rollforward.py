"""Rolling a restored table forward from the container: the judging and the plan (read-only).

After the database is restored to an earlier time T, the container holds what happened since:
blobs put after T (committed, no row), replaced after T (the row names a blob now tagged
`retired`, a newer committed blob names the same document), deleted after T (the row names a
retired blob and nothing newer is committed). Each blob's metadata names its document
(`blob_safetynet.protocol.identity`), so the rows can be judged document by document.

What one document gets, from one listing (`include=metadata,tags`) read before the rows and the
records (a listed blob's reservation is then always among the rows read):

- a restored Pending row whose blob is sealed (committed or retired): `publish`, the sweeper's
  own rule (the bytes are complete);
- a row whose blob is retired or missing while a committed blob of the document exists: `move`
  to the newest one (`identity.succession`), by the replace's own steps (intent, switch, retire);
- a row whose blob is retired with nothing committed: deleted after T. By default the document
  is kept: `reseal` tags its newest blob committed again (and `move`s the row to it when that
  is not the one it names). With `reapply_deletes`, or when a document put after the delete
  holds its name, `delete` applies the delete again;
- no row, a committed blob: `rebuild` the row from the newest one's metadata, once its bytes
  bear the metadata out (`identity.verify`, the only path to a rebuilt row);
- a committed blob superseded by the one the row names (its replace links lead back to it, or
  it replaced the same blob the row's did: a replace made by the application since the restore,
  from the restored row), or a committed blob of a row-less document the database records
  deleted after that blob was written: `retire` it, recorded, as the replace or delete would;
- a retired blob no row nor record names: `record` it retired, so the sweeper deletes it after
  its grace like any other.

Where the evidence is not enough, nothing is written and the document is reported for a person:
a committed blob that may be newer than the one its row names (`ambiguous`: a replace whose tag
write failed looks the same as one that was never acknowledged), metadata that does not read or
does not match the bytes, a name another document holds, a row whose blob is gone with no
newer one (`safetynet recover` may find it in the nets), a committed blob without identity.

The roll-forward never re-seals a retired blob that a newer committed blob of its document
supersedes: that blob's `retired` tag is the only evidence the newer blob's replace was
acknowledged (for a rerun after a kill, and for the sweeper, which keeps a restored replace's
blob only while the row's blob is retired or gone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol import identity
from blob_safetynet.reconcile.listing import (
    ListedBlob,
    list_blobs,
    listed_blob,
)
from blob_safetynet.recover.rollforward_plan import (
    ACTIONS,
    AMBIGUOUS,
    DELETE,
    KEPT,
    MISSING,
    MOVE,
    NAME_TAKEN,
    PENDING_GONE,
    PUBLISH,
    REAPPLIED,
    REBUILD,
    RECORD,
    RESEAL,
    RETIRE,
    UNKNOWN,
    UNREADABLE,
    Finding,
    Judgement,
    Step,
)
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import BlobRecord, BlobRecordKind, Document, Status


@dataclass(frozen=True)
class View:
    """The container's protocol blobs, then the rows, then the crash-window records."""

    listed: Mapping[str, ListedBlob]
    rows: Mapping[str, Document]
    records: Mapping[str, BlobRecord]

    @classmethod
    def read(cls, store: DocumentStore, container: ContainerClient) -> View:
        """In this order, so a blob listed always has its reservation among the rows read; a
        row's blob the listing missed (written since) is read by itself."""
        listed = list_blobs(container)
        rows = {document.id: document for document in store.all()}
        records = {record.blob_name: record for record in store.records()}
        for document in rows.values():
            if document.blob_name not in listed:
                found = read_one(container, document.blob_name)
                if found is not None:
                    listed[document.blob_name] = found
        return cls(listed, rows, records)

    def row_of_blob(self) -> dict[str, Document]:
        return {document.blob_name: document for document in self.rows.values()}


def read_one(container: ContainerClient, name: str) -> ListedBlob | None:
    """One blob as a listing shows it (state tag, identity), read now; None when missing."""
    client = container.get_blob_client(name)
    try:
        properties = client.get_blob_properties()
        tags = client.get_blob_tags()
    except ResourceNotFoundError:
        return None
    return listed_blob(name, tags, properties, properties.etag)


def newest_first(blobs: Iterable[ListedBlob]) -> tuple[list[ListedBlob], bool]:
    """Identified blobs of one document, newest first, and whether the replace links alone
    ordered them (`identity.succession`)."""
    by_name = {blob.name: blob for blob in blobs if blob.identity is not None}
    if not by_name:
        return [], True
    order = identity.succession(
        {name: blob.identity for name, blob in by_name.items() if blob.identity}
    )
    return [by_name[name] for name in order.newest_first], order.certain


@dataclass
class _Judge:
    view: View
    reapply_deletes: bool
    out: Judgement = field(default_factory=Judgement)

    def __post_init__(self) -> None:
        self.named = self.view.row_of_blob()
        self.of_document: dict[str, list[ListedBlob]] = {}
        self.by_name = {d.name: d for d in self.view.rows.values()}
        self.takers: dict[str, ListedBlob] = {}
        """Name -> the committed blob a rowless document would be rebuilt from."""
        self.deleted: set[str] = set()

    def referenced(self, blob: ListedBlob) -> bool:
        return blob.name in self.named or blob.name in self.view.records

    def intent(self, blob: ListedBlob) -> bool:
        record = self.view.records.get(blob.name)
        return record is not None and record.kind is BlobRecordKind.INTENT

    def run(self) -> Judgement:
        for blob in self.view.listed.values():
            if blob.state not in (COMMITTED, RETIRED):
                continue
            if blob.identity is not None:
                self.of_document.setdefault(blob.identity.document_id, []).append(blob)
            elif blob.state == COMMITTED and not self.referenced(blob):
                self.unidentified(blob)
        rowless = {doc: self.rowless(doc) for doc in set(self.of_document) - set(self.view.rows)}
        for document in sorted(self.view.rows.values(), key=lambda d: d.id):
            self.rowed(document, self.of_document.get(document.id, []))
        for steps in rowless.values():
            rebuild = next((step for step in steps if step.action == REBUILD), None)
            holder = None if rebuild is None else self.by_name.get(rebuild.name)
            if rebuild is None or holder is None or holder.id in self.deleted:
                self.out.steps += steps
                continue
            self.find(
                NAME_TAKEN,
                rebuild.blob,
                rebuild.document,
                f"document {holder.id} holds the name {rebuild.name!r}; no row rebuilt",
            )
            self.out.steps += [s for s in steps if s.action != REBUILD and s.row_blob is None]
        self.out.steps.sort(key=lambda s: (ACTIONS.index(s.action), s.document, s.blob))
        return self.out

    def find(self, kind: str, blob: str, document: str | None, detail: str) -> None:
        self.out.findings.append(Finding(kind, blob, document, detail))

    def unidentified(self, blob: ListedBlob) -> None:
        if blob.identity_problem is None:
            self.out.unknown += 1
            self.find(
                UNKNOWN,
                blob.name,
                None,
                "committed, no row names it, no identity in its metadata; left alone",
            )
        else:
            self.find(
                UNREADABLE,
                blob.name,
                None,
                f"its identity metadata does not read ({blob.identity_problem}); left alone",
            )

    def record_retired(
        self, blobs: Sequence[ListedBlob], keep: Iterable[str], rebuilt: str | None
    ) -> list[Step]:
        """`record` for the retired blobs no row nor record names, but those in `keep`; after
        the row is rebuilt from `rebuilt` when one is to be (until then, a record of the
        row-less document would read as its deletion)."""
        kept = set(keep)
        return [
            Step(
                RECORD,
                b.identity.document_id,
                b.identity.name,
                b.name,
                rebuilt,
                "retired; no row nor record names it",
            )
            for b in blobs
            if b.identity is not None
            and b.state == RETIRED
            and not self.referenced(b)
            and b.name not in kept
        ]

    def leftovers(
        self, current: ListedBlob | None, blobs: Sequence[ListedBlob], row_decides: bool
    ) -> list[Step]:
        """For committed blobs of a document besides its `current` one (the row's, or the one a
        row is moved to or rebuilt from): `retire` those it supersedes, the rest reported.

        `current` supersedes a blob its replace links lead back to, or, when the row names it
        (`row_decides`), a blob that replaced the same blob it did: of two replaces of one blob
        only one switched the row, and the row says which."""
        steps = []
        for blob in blobs:
            if blob.identity is None or (current is not None and blob.name == current.name):
                continue
            if current is not None and self.supersedes(current, blob, row_decides):
                steps.append(
                    Step(
                        RETIRE,
                        blob.identity.document_id,
                        blob.identity.name,
                        blob.name,
                        current.name,
                        f"committed, superseded by {current.name}: a replace whose retire "
                        "did not happen",
                    )
                )
            else:
                self.find(
                    AMBIGUOUS,
                    blob.name,
                    blob.identity.document_id,
                    "committed, no row nor record names it, and it may be newer than the "
                    "blob its row names: a replace whose retire failed looks like one never "
                    "acknowledged; left for a person",
                )
        return steps

    def supersedes(self, newer: ListedBlob, older: ListedBlob, row_decides: bool) -> bool:
        assert newer.identity is not None
        assert older.identity is not None
        parent = newer.identity.replaces
        if row_decides and parent is not None and older.identity.replaces == parent:
            return True
        links = {
            b.name: b.identity.replaces
            for b in self.of_document.get(newer.identity.document_id, [])
            if b.identity is not None
        }
        seen: set[str] = set()
        while parent is not None and parent not in seen:
            if parent == older.name:
                return True
            seen.add(parent)
            parent = links.get(parent)
        return False

    def deleted_since(self, document_id: str, blob: ListedBlob) -> bool:
        """Whether the database records a blob of this row-less document retired after `blob`
        was written: the document was deleted (by the application, since the restore) after
        these bytes were put."""
        return any(
            record.document_id == document_id
            and record.kind is BlobRecordKind.RETIRED
            and record.recorded_utc > blob.last_modified
            for record in self.view.records.values()
        )

    def rowless(self, document_id: str) -> list[Step]:
        blobs = self.of_document[document_id]
        committed = [b for b in blobs if b.state == COMMITTED and not self.referenced(b)]
        ordered, certain = newest_first(committed)
        if not ordered:
            return self.record_retired(blobs, (), None)
        target = ordered[0]
        assert target.identity is not None
        if self.deleted_since(document_id, target):
            return [
                Step(
                    RETIRE,
                    document_id,
                    target.identity.name,
                    blob.name,
                    None,
                    "committed, but the database records the document deleted after these "
                    "bytes were written (since the restore): the delete is finished",
                )
                for blob in ordered
            ] + self.record_retired(blobs, (), None)
        how = "" if certain else "; the writers' clocks chose the newest"
        self.takers.setdefault(target.identity.name, target)
        return [
            Step(
                REBUILD,
                document_id,
                target.identity.name,
                target.name,
                detail=f"no row; rebuilt from its metadata once its bytes bear it out{how}",
            ),
            *self.leftovers(target, ordered, row_decides=False),
            *self.record_retired(blobs, (), target.name),
        ]

    def rowed(self, row: Document, blobs: list[ListedBlob]) -> None:
        own = self.view.listed.get(row.blob_name)
        state = None if own is None else own.state
        others = [b for b in blobs if b.name != row.blob_name]
        steps: list[Step] = []
        if row.status is Status.PENDING:
            if state not in (COMMITTED, RETIRED):
                if state is None and any(b.state == COMMITTED for b in others):
                    self.find(
                        PENDING_GONE,
                        row.blob_name,
                        row.id,
                        "a Pending row whose blob is gone while a committed blob of its document exists: the sweeper removes the row, then run again",
                    )
                self.out.steps += self.record_retired(others, (), None)
                return
            steps.append(
                Step(
                    PUBLISH,
                    row.id,
                    row.name,
                    row.blob_name,
                    row.blob_name,
                    "a Pending row whose blob is sealed: the put finished after the restore point",
                )
            )
        free = [b for b in others if b.state == COMMITTED and not self.referenced(b)]
        restored = [b for b in others if b.state == COMMITTED and self.intent(b)]
        keep: list[str] = []
        if state in (RETIRED, None) and (free or restored):
            ordered, certain = newest_first(free + restored)
            target = ordered[0]
            how = "" if certain else "; the writers' clocks chose the newest"
            was = "retired" if state == RETIRED else "missing"
            steps.append(
                Step(
                    MOVE,
                    row.id,
                    row.name,
                    target.name,
                    row.blob_name,
                    f"its blob is {was}; a newer committed blob holds the document{how}",
                )
            )
            steps += self.leftovers(target, [b for b in ordered if b in free], row_decides=False)
        elif state == RETIRED:
            keep = self.deleted_after(row, own, others, steps)
        elif state is None:
            self.find(
                MISSING,
                row.blob_name,
                row.id,
                "a row whose blob is gone and no committed blob of its document exists: `safetynet recover` gives it back if the nets keep it",
            )
        else:
            current = own if state == COMMITTED else None
            steps += self.leftovers(current, free, row_decides=True)
        self.out.steps += steps + self.record_retired(others, keep, None)

    def deleted_after(
        self, row: Document, own: ListedBlob | None, others: list[ListedBlob], steps: list[Step]
    ) -> list[str]:
        """The steps for a document deleted after the restore point; the blobs kept."""
        assert own is not None
        retired = [b for b in [own, *others] if b.state == RETIRED]
        ordered, _ = newest_first(retired)
        newest = ordered[0] if ordered and own.identity is not None else own
        taker = self.takers.get(row.name)
        if (
            taker is not None
            and taker.identity is not None
            and taker.identity.document_id != row.id
        ):
            self.deleted.add(row.id)
            steps.append(
                Step(
                    DELETE,
                    row.id,
                    row.name,
                    row.blob_name,
                    row.blob_name,
                    f"deleted after the restore point: document {taker.identity.document_id}, put later, holds its name",
                    taker.name,
                )
            )
            return []
        if self.reapply_deletes:
            self.deleted.add(row.id)
            steps.append(Step(DELETE, row.id, row.name, row.blob_name, row.blob_name, REAPPLIED))
            return []
        steps.append(Step(RESEAL, row.id, row.name, newest.name, row.blob_name, KEPT))
        if newest.name != row.blob_name:
            steps.append(
                Step(
                    MOVE, row.id, row.name, newest.name, row.blob_name, f"{KEPT}: its newest bytes"
                )
            )
        return [newest.name]


def judge(view: View, reapply_deletes: bool = False) -> Judgement:
    """What the roll-forward does to make `view`'s table and container agree; writes nothing."""
    return _Judge(view, reapply_deletes).run()
