"""A deleted protocol container: found among the kept ones, restored only while its name is free.

With container soft delete on, a deleted container and its blobs are kept for the retention
period; List Containers `include=deleted` names it with its `Version`, `DeletedTime` and
`RemainingRetentionDays`, and Restore Container brings it back, refused with 409
ContainerAlreadyExists while a live container holds the name
(https://learn.microsoft.com/rest/api/storageservices/list-containers2,
https://learn.microsoft.com/rest/api/storageservices/restore-container,
https://learn.microsoft.com/azure/storage/blobs/soft-delete-container-overview).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.reconcile.listing import RepairRefusedError


@dataclass(frozen=True)
class DeletedContainer:
    name: str
    version: str
    deleted_utc: datetime | None
    days_left: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "deleted_utc": None if self.deleted_utc is None else self.deleted_utc.isoformat(),
            "days_left": self.days_left,
        }


def _service(container: ContainerClient) -> BlobServiceClient:
    """The account's client on the container's own pipeline (credential, retries, transport):
    the SDK's documented sample `get_blob_service_client_from_container_client`."""
    return container._get_blob_service_client()


def find_deleted(container: ContainerClient) -> DeletedContainer | None:
    """The most recently deleted container of this name still kept, or None.

    The SDK's ContainerProperties drops `DeletedTime` and `RemainingRetentionDays` (azure-
    storage-blob 12.x keeps only `deleted` and `version`), so the listing is read through the
    generated client, which keeps both.
    """
    service = _service(container)
    generated = service._client.service
    found: list[DeletedContainer] = []
    marker = None
    while True:
        page = generated.list_containers_segment(
            prefix=container.container_name, marker=marker, include=["deleted"]
        )
        for item in page.container_items or []:
            if item.name == container.container_name and item.deleted:
                properties = item.properties
                found.append(
                    DeletedContainer(
                        item.name,
                        item.version or "",
                        properties.deleted_time,
                        properties.remaining_retention_days,
                    )
                )
        marker = page.next_marker
        if not marker:
            break
    if not found:
        return None
    return max(found, key=lambda c: (c.deleted_utc is not None, c.deleted_utc or 0, c.version))


def restore(container: ContainerClient, deleted: DeletedContainer) -> None:
    """Restore Container under its own name; RepairRefusedError while the name is taken."""
    if container.exists():
        raise RepairRefusedError(
            f"container {container.container_name!r} exists again; the deleted one (version "
            f"{deleted.version}) is restored only while the name is free. Nothing restored"
        )
    try:
        _service(container).undelete_container(deleted.name, deleted.version)
    except HttpResponseError as error:
        if error.status_code == 409:
            raise RepairRefusedError(
                f"container {container.container_name!r} was created again while restoring; "
                "nothing restored"
            ) from None
        raise
