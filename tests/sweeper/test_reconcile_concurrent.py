"""Reconcile run while a document is replaced reports no finding the replace explains."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import reconcile
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document

FUTURE = datetime.now(UTC) + timedelta(hours=1)


class RowsReadAfter(DocumentStore):
    """A store that runs `before_rows` once, when reconcile reads the rows after its listing."""

    before_rows: Callable[[], None] | None = None

    def all(self) -> list[Document]:
        hook, self.before_rows = self.before_rows, None
        if hook is not None:
            hook()
        return super().all()


class PausedReplace:
    """A replace in a thread of its own, held at `step` until the test lets it finish."""

    def __init__(self, protocol: UploadProtocol, document_id: str, step: str) -> None:
        self.reached = threading.Event()
        self.go = threading.Event()
        self.error: BaseException | None = None
        self._step = step
        protocol.checkpoint = self._pause
        self._thread = threading.Thread(
            target=self._run, args=(protocol, document_id), name="replace"
        )

    def _pause(self, step: str) -> None:
        if step == self._step:
            self.reached.set()
            assert self.go.wait(30)

    def _run(self, protocol: UploadProtocol, document_id: str) -> None:
        try:
            protocol.replace(document_id, b"new bytes", ".txt")
        except BaseException as error:  # reported by finish()
            self.error = error
            self.reached.set()

    def start(self) -> None:
        self._thread.start()
        assert self.reached.wait(30)

    def finish(self) -> None:
        self.go.set()
        self._thread.join(30)
        assert self.error is None


@pytest.mark.parametrize(
    ("step", "would_be"),
    [("replace.intent", "dangling"), ("replace.upload", "unsealed")],
)
def test_a_replace_between_listing_and_rows_is_not_a_finding(
    db_url: str, container: ContainerClient, step: str, would_be: str
) -> None:
    """A replace that switches after the listing (its new blob unlisted, or listed pending)
    is neither dangling nor unsealed: each finding is read again before it is reported."""
    store = RowsReadAfter.from_url(db_url)
    assert isinstance(store, RowsReadAfter)
    store.init_schema()
    try:
        document = UploadProtocol(store, container).put("report.txt", b"old bytes", ".txt")
        replace = PausedReplace(UploadProtocol(store, container), document.id, step)
        replace.start()
        store.before_rows = replace.finish

        result = reconcile(store, container, FUTURE)

        assert store.before_rows is None, "the replace ran between the listing and the rows"
        assert (result.dangling, result.unsealed) == ([], []), f"false {would_be} finding"
        assert result.errors == []
    finally:
        store.engine.dispose()
