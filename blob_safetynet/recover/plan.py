"""The recovery plan: which Ready rows lost their bytes, and which kept copy would give each back.

Planning only reads. A Ready row is judged lost when its blob is missing, or overwritten behind
the protocol: its length differs from the row's, or the nets keep a copy of that name (the
protocol never writes a name twice, so a snapshot or previous version means something did) and
the live bytes' SHA-256 differs from the row's; `verify_bytes` reads every live blob. The copies
are listed in the order recovery tries them (`BlobNets.preferred`), each with the retention days
it has left. A copy that can be read now (a previous version, a restored snapshot) is checked
here; a soft-deleted one can be read only after Undelete Blob, so `apply` checks it.

A plan names the account, container, database and table it was made against; `check_target`
refuses it anywhere else before anything is written (as `safetynet reconcile --apply-plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.reconcile.listing import RepairRefusedError
from blob_safetynet.recover.containers import DeletedContainer, find_deleted
from blob_safetynet.recover.nets import (
    BlobNets,
    KeptCopy,
    ListingOrderError,
    copy_client,
    read_digest,
    read_nets,
    stream_nets,
)
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Content, Document

PLAN_VERSION = 1
PLAN_KIND = "safetynet-recover-plan"
MISSING = "missing"
OVERWRITTEN = "overwritten"
NO_COPY = "no kept copy"
COPIES_DIFFER = "copies differ"
EXPIRED = "retention expired"
NO_CONTENT = "the row records no length and SHA-256"
PAGE = 1000


@dataclass(frozen=True)
class Target:
    """Where a plan was made: a plan applies only here."""

    account: str
    endpoint: str
    container: str
    database_id: str
    table: str

    @classmethod
    def of(cls, store: DocumentStore, container: ContainerClient) -> Target:
        url = urlsplit(container.url)
        return cls(
            account=container.account_name or "",
            endpoint=f"{url.scheme}://{url.netloc}",
            container=container.container_name,
            database_id=store.database_id(),
            table=store.layout.qualified_name,
        )

    def as_dict(self) -> dict[str, str]:
        return {
            "account": self.account,
            "endpoint": self.endpoint,
            "container": self.container,
            "database_id": self.database_id,
            "table": self.table,
        }


def check_target(plan: Mapping[str, Any], here: Target) -> None:
    """RepairRefusedError unless `plan` is a recover plan made against `here`."""
    if plan.get("kind") != PLAN_KIND or plan.get("version") != PLAN_VERSION:
        raise RepairRefusedError("not a recover plan (kind or version missing); nothing restored")
    if not isinstance(plan.get("rows"), list):
        raise RepairRefusedError("the plan has no `rows` list; nothing restored")
    made = plan.get("target")
    if not isinstance(made, Mapping):
        raise RepairRefusedError("the plan names no target; nothing restored")
    for key, value in here.as_dict().items():
        if made.get(key) != value:
            raise RepairRefusedError(
                f"the plan was made against {key} {made.get(key)!r}, not {value!r}; nothing "
                "restored"
            )


@dataclass
class RowPlan:
    document: Document
    content: Content | None
    finding: str
    live_etag: str | None
    copies: list[KeptCopy] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)
    """Idents of copies whose bytes were read here and match the row."""
    reason: str | None = None
    gone: list[str] = field(default_factory=list)
    """Kept copies an inventory report shows that the live listing no longer does (`recover
    --inventory`): never tried, named so a person sees what the report promised."""

    @property
    def days_left(self) -> int | None:
        """Retention days left on the copy recovery would use first (None: no clock)."""
        return self.copies[0].days_left if self.copies else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "document": self.document.id,
            "name": self.document.name,
            "blob": self.document.blob_name,
            "length": None if self.content is None else self.content.length,
            "sha256": None if self.content is None else self.content.sha256,
            "finding": self.finding,
            "live_etag": self.live_etag,
            "copies": [{**c.as_dict(), "verified": c.ident in self.verified} for c in self.copies],
            "days_left": self.days_left,
            "reason": self.reason,
            "gone_since_report": list(self.gone),
        }


def judge(
    container: ContainerClient,
    document: Document,
    content: Content | None,
    nets: BlobNets,
    verify_bytes: bool = False,
) -> RowPlan | None:
    """The plan for one Ready row, or None when its live blob holds the row's bytes."""
    live = nets.live
    finding = MISSING if live is None else None
    if live is not None and content is not None:
        if live.length != content.length:
            finding = OVERWRITTEN
        elif verify_bytes or nets.copies:
            digest = read_digest(container.get_blob_client(document.blob_name))
            finding = None if digest.matches(content) else OVERWRITTEN
    if finding is None:
        return None
    row = RowPlan(document, content, finding, None if live is None else live.etag)
    if content is None:
        row.reason = NO_CONTENT
        return row
    candidates = nets.preferred()
    if not candidates:
        row.reason = NO_COPY
        return row
    for copy in candidates:
        if copy.length != content.length:
            continue
        if not copy.soft_deleted and copy.kind != "deleted":
            try:
                digest = read_digest(copy_client(container, document.blob_name, copy))
            except ResourceNotFoundError:
                continue
            if not digest.matches(content):
                continue
            row.verified.append(copy.ident)
        row.copies.append(copy)
    if not row.copies:
        row.reason = COPIES_DIFFER
    elif all(c.days_left is not None and c.days_left <= 0 for c in row.copies):
        row.reason = EXPIRED
    return row


def ready_rows(store: DocumentStore) -> Iterator[tuple[Document, Content | None]]:
    """Every Ready row with its recorded content, a page at a time."""
    after = ""
    while True:
        page = store.ready_with_content(after, PAGE)
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1][0].id


def rows_by_blob_name(store: DocumentStore) -> Iterator[tuple[Document, Content | None]]:
    """Every Ready row with its recorded content in its blob name's byte order, a page at a
    time."""
    after = ""
    while True:
        page = store.ready_by_blob_name(after, PAGE)
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1][0].blob_name


def plan_rows(
    store: DocumentStore,
    container: ContainerClient,
    verify_bytes: bool = False,
    only: Callable[[Document], bool] = lambda _: True,
) -> list[RowPlan]:
    """A RowPlan for every Ready row (that `only` accepts) whose bytes are lost.

    The listing and the table are read side by side in blob name order, a page of each at a
    time, so memory holds the lost rows and not the container (`stream_nets`). A listing out
    of code point order (a name the service sorts otherwise) cannot be merged that way: the
    plan is then made again from the whole listing held at once, and says nothing different."""
    try:
        return list(_merged(store, container, verify_bytes, only))
    except ListingOrderError:
        listed = read_nets(container)
        return [
            row
            for document, content in ready_rows(store)
            if only(document)
            and (
                row := judge(
                    container,
                    document,
                    content,
                    listed.get(document.blob_name, BlobNets()),
                    verify_bytes,
                )
            )
            is not None
        ]


def _merged(
    store: DocumentStore,
    container: ContainerClient,
    verify_bytes: bool,
    only: Callable[[Document], bool],
) -> Iterator[RowPlan]:
    """Each lost row, from the rows and the listing merged by blob name."""

    def decide(document: Document, content: Content | None, nets: BlobNets) -> RowPlan | None:
        if not only(document):
            return None
        return judge(container, document, content, nets, verify_bytes)

    return merge_by_name(rows_by_blob_name(store), stream_nets(container), decide)


Decide = Callable[[Document, Content | None, BlobNets], RowPlan | None]


def merge_by_name(
    rows: Iterable[tuple[Document, Content | None]],
    listing: Iterator[tuple[str, BlobNets]],
    decide: Decide,
) -> Iterator[RowPlan]:
    """`decide` on each row with its name's nets (empty when `listing` lacks the name), both
    streams in blob name order; the rest of `listing` is read to its end, so a source that
    checks its order checks all of it."""
    name, nets = next(listing, (None, BlobNets()))
    for document, content in rows:
        while name is not None and name < document.blob_name:
            name, nets = next(listing, (None, BlobNets()))
        here = nets if name == document.blob_name else BlobNets()
        row = decide(document, content, here)
        if row is not None:
            yield row
    for _ in listing:
        pass


def make_plan(
    store: DocumentStore,
    container: ContainerClient,
    *,
    verify_bytes: bool = False,
    horizon_days: int = 2,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The printable, reviewable plan; nothing is written.

    When the container itself is gone, the plan names the deleted container to restore (with
    its version and days left) and lists no rows: they are judged after the restore.
    """
    target = Target.of(store, container)
    deleted: DeletedContainer | None = None
    rows: list[RowPlan] = []
    if not container.exists():
        deleted = find_deleted(container)
        if deleted is None:
            raise RepairRefusedError(
                f"container {container.container_name!r} does not exist and no deleted "
                "container of that name is kept; nothing to recover from"
            )
    else:
        rows = plan_rows(store, container, verify_bytes)
    return build_plan(target, rows, deleted, horizon_days, now or datetime.now(UTC))


def build_plan(
    target: Target,
    rows: list[RowPlan],
    deleted: DeletedContainer | None,
    horizon_days: int,
    now: datetime,
    source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    recoverable = [r for r in rows if r.reason is None]
    clocks = [r.days_left for r in recoverable if r.days_left is not None]
    if deleted is not None and deleted.days_left is not None:
        clocks.append(deleted.days_left)
    return {
        "kind": PLAN_KIND,
        "version": PLAN_VERSION,
        "made_utc": now.isoformat(),
        "target": target.as_dict(),
        "container_restore": None if deleted is None else deleted.as_dict(),
        "candidates": dict(source) if source is not None else {"from": "listing"},
        "rows": [r.as_dict() for r in rows],
        "summary": {
            "recoverable": len(recoverable),
            "unrecoverable": len(rows) - len(recoverable),
            "soonest_days_left": min(clocks) if clocks else None,
            "horizon_days": horizon_days,
            "expiring": sum(1 for days in clocks if days <= horizon_days),
        },
    }


def expiring(plan: Mapping[str, Any]) -> int:
    """How many copies (and the container) the plan needs expire within its horizon."""
    summary = plan.get("summary")
    return int(summary.get("expiring", 0)) if isinstance(summary, Mapping) else 0
