"""Recovery beside live writers and the sweeper: no committed document lost or rolled back,
nothing a newer write put there overwritten, and every Ready row's blob ends holding its bytes."""

from __future__ import annotations

import hashlib
import threading
from datetime import timedelta

from azure.storage.blob import ContainerClient

from blob_safetynet.protocol.upload import ProtocolError, UploadProtocol
from blob_safetynet.recover.apply import apply_plan
from blob_safetynet.recover.plan import make_plan
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper.sweep import Sweeper


def test_recover_beside_puts_replaces_deletes_and_the_sweeper(
    protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """While a plan for 40 lost documents is applied, writers replace and delete some of the
    same documents and put new ones, and the sweeper runs: afterwards (and after one more
    recover pass) every Ready row's blob holds exactly the row's bytes, tagged committed, and
    every replace's new bytes survive."""
    documents = [protocol.put(f"doc-{n}.txt", f"first {n}".encode() * 4, ".txt") for n in range(40)]
    for number, document in enumerate(documents):
        if number % 2:
            bound.delete_blob(document.blob_name)
        else:
            bound.upload_blob(document.blob_name, b"wrong", overwrite=True)
    plan = make_plan(store, bound)
    replaced: dict[str, bytes] = {}
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for number, document in enumerate(documents):
                if number % 5 == 0:
                    data = f"second {number}".encode()
                    protocol.replace(document.id, data, ".txt")
                    replaced[document.id] = data
                elif number % 5 == 1:
                    protocol.delete(document.id)
                elif number % 5 == 2:
                    protocol.put(f"new-{number}.txt", b"new", ".txt")
        except (ProtocolError, OSError) as error:
            errors.append(error)

    def sweeper() -> None:
        # Retired blobs (replaced and deleted documents') go at once; uploads in flight are
        # younger than the cutoff and left alone, as in production.
        settings = SweepSettings(cutoff=timedelta(minutes=15), retired_grace=timedelta(0))
        for _ in range(3):
            Sweeper(store, bound, settings).run()

    threads = [threading.Thread(target=writer), threading.Thread(target=sweeper)]
    for thread in threads:
        thread.start()
    apply_plan(store, bound, plan)
    for thread in threads:
        thread.join()
    apply_plan(store, bound, make_plan(store, bound))

    assert errors == []
    for document, content in store.ready_with_content():
        assert content is not None
        blob = bound.get_blob_client(document.blob_name)
        data = blob.download_blob().readall()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (content.length, content.sha256)
        assert blob.get_blob_tags()[STATE_TAG] == COMMITTED
        if document.id in replaced:
            assert data == replaced[document.id]
    assert make_plan(store, bound)["rows"] == []
