"""The data-protection nets Azurite lacks, in front of it, for the demo and the recovery tests.

Azurite answers Undelete Blob with 501 and keeps nothing a delete or an overwrite removes. This
double keeps what Azure documents its nets keep, in memory, and answers the requests that reach
them; Azurite holds the live blobs and answers everything else. Each behaviour follows the page
cited beside it:

- blob soft delete: Delete Blob keeps the blob soft-deleted (with its snapshots); Put Blob, Put
  Block List or Copy Blob over a live blob keeps a soft-deleted snapshot of what it held; data
  of a soft-deleted blob or snapshot cannot be read until restored
  (https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview);
- Undelete Blob restores a soft-deleted blob and its soft-deleted snapshots; on a live blob it
  restores the snapshots only; with versioning on it does not restore the current version
  (https://learn.microsoft.com/rest/api/storageservices/undelete-blob and the overview above);
- blob versioning: every overwrite and delete keeps the previous version, readable by
  `versionid` (https://learn.microsoft.com/azure/storage/blobs/versioning-overview);
- List Blobs `include=deleted,snapshots,versions` lists what is kept, with `Deleted`,
  `DeletedTime` and `RemainingRetentionDays`
  (https://learn.microsoft.com/rest/api/storageservices/list-blobs);
- container soft delete: Delete Container keeps the container and its blobs; List Containers
  `include=deleted` lists it with its `Version`; Restore Container brings it back under its
  name, 409 ContainerAlreadyExists when the name is taken
  (https://learn.microsoft.com/rest/api/storageservices/restore-container,
  https://learn.microsoft.com/azure/storage/blobs/soft-delete-container-overview).

Time passes on `RecoveryNets.age(days)`: kept items whose retention has run out are purged.
Writes that bypass the double (the admin client) are not seen by it, as on Azure a write to
another account would not be.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from azure.storage.blob import BlobServiceClient

from blob_safetynet.embedded.azurite import dev_connection_string
from blob_safetynet.embedded.proxy import Handler, LatencyProxy, LatencyProxyServer, blob_of
from blob_safetynet.embedded.recovery_answers import extended, merged_listing
from blob_safetynet.embedded.recovery_nets import DeletedContainer, Kept, RecoveryNets

__all__ = ["DeletedContainer", "Kept", "RecoveryDouble", "RecoveryNets"]


class _RecoveryServer(LatencyProxyServer):
    nets: RecoveryNets


class _RecoveryHandler(Handler):
    """Sends each request the nets answer to `RecoveryNets`, and the rest to Azurite. Faults
    the latency proxy injects still apply (they are decided before `_send_upstream`)."""

    server: _RecoveryServer

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> Any:
        nets = self.server.nets
        split = urlsplit(self.path)
        query = parse_qs(split.query)
        parts = unquote(split.path).split("/", 3)
        comp = (query.get("comp") or [""])[0]
        include = set(",".join(query.get("include", [])).split(","))

        def forward() -> Any:
            return super(_RecoveryHandler, self)._send_upstream(headers, body)

        key = blob_of(self.path)
        if key is None:
            container = parts[2] if len(parts) > 2 else ""
            if container and query.get("restype") == ["container"]:
                if self.command == "DELETE" and not comp:
                    return nets.delete_container(container, forward)
                if self.command == "PUT" and comp == "undelete":
                    return nets.restore_container(container, headers)
                if (
                    self.command == "GET"
                    and comp == "list"
                    and include & {"deleted", "snapshots", "versions"}
                ):
                    prefix = (query.get("prefix") or [""])[0]
                    after = (query.get("marker") or [""])[0]
                    return merged_listing(
                        forward(),
                        lambda upto: nets.list_entries(container, prefix, include, after, upto),
                    )
            if not container and self.command == "GET" and comp == "list" and "deleted" in include:
                prefix = (query.get("prefix") or [""])[0]
                return extended(forward(), "Containers", nets.container_entries(prefix))
            return forward()
        ident = (query.get("snapshot") or query.get("versionid") or [""])[0]
        if ident and self.command in ("GET", "HEAD") and comp in ("", "tags"):
            answer = nets.read_kept(key, ident, self.command == "HEAD", comp, headers)
            return forward() if answer is None else answer
        if self.command == "PUT" and comp == "undelete":
            return nets.undelete(key)
        if self.command == "DELETE" and not ident:
            return nets.delete(key, forward)
        if self.command == "PUT" and comp in ("", "blocklist"):
            source = headers.get("x-ms-copy-source")
            if source and nets._kept_source(source) is not None:
                return nets.write(key, lambda: nets.copy_kept(key, source, headers))
            return nets.write(key, forward)
        return forward()


class RecoveryDouble(LatencyProxy):
    """`with RecoveryDouble(azurite.port) as service:` a blob endpoint whose account has blob
    soft delete (or, with `versioning`, versioning too) and container soft delete on; use
    `service.connection_string`, and `service.nets` to let time pass or look at what is kept."""

    def __init__(
        self,
        upstream_port: int,
        *,
        versioning: bool = False,
        retention_days: int = 7,
        container_retention_days: int = 7,
        delay_s: float = 0.0,
    ) -> None:
        super().__init__(upstream_port, delay_s=delay_s, handler=_RecoveryHandler)
        admin = BlobServiceClient.from_connection_string(dev_connection_string(upstream_port))
        self.nets = RecoveryNets(
            admin,
            versioning=versioning,
            retention_days=retention_days,
            container_retention_days=container_retention_days,
        )
        self._server.nets = self.nets  # type: ignore[attr-defined]
