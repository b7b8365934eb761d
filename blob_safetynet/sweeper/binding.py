"""Which database a container belongs to: both sides name each other, or nothing is swept.

The container carries a marker blob naming the database's id; the database records the
container (`account/container`). A sweep with a wrong `--db` or `--container` would delete
the other deployment's rows as "never landed", so a pair is bound only by an operator
(`safetynet binding bind`) or by a first sweep that finds evidence the two belong together:
both are new (no row, no record, no blob: nothing can be lost), or the blobs the newest rows
and records name are in the container and every Ready row among them finds its blob. Blob
names are random (a UUID each), so another deployment's container holds none of them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol import blobs
from blob_safetynet.store.documents import DocumentStore

EVIDENCE_SAMPLE = 16
"""Rows and records whose blobs a first sweep looks up: a few reads, whatever the table's size."""
EVIDENCE_LOOKUPS = 8
"""Lookups in flight at once: within the SDK's default pool of 10 connections per host
(blob_safetynet/protocol/pooling.py), so none is opened only to be thrown away."""
INTERNAL_PREFIX = blobs.BINDING_BLOB.split("/", 1)[0] + "/"
BIND_COMMAND = "safetynet binding bind"
UNBIND_COMMAND = "safetynet binding unbind"


class ContainerBindingError(RuntimeError):
    """The container belongs to another database, or the pair is not known to belong together."""


class UnboundPairError(ContainerBindingError):
    """Neither side is bound and the first sweep found no proof that they belong together."""


def identity(container: ContainerClient) -> str:
    return f"{container.account_name}/{container.container_name}"


@dataclass(frozen=True)
class Binding:
    """Both halves as read: what the database names, and what the container's marker names
    (None: no marker; '': a marker naming no database)."""

    database_id: str
    container: str
    database_names: str | None
    container_names: str | None

    @property
    def bound(self) -> bool:
        return self.database_names == self.container and self.container_names == self.database_id

    @property
    def unbound(self) -> bool:
        return self.database_names is None and self.container_names is None

    def as_dict(self) -> dict[str, object]:
        return {
            "database_id": self.database_id,
            "container": self.container,
            "database_bound_to": self.database_names,
            "container_bound_to": self.container_names,
            "bound": self.bound,
        }


def read_binding(store: DocumentStore, container: ContainerClient) -> Binding:
    """Both halves, the database's first (a sweep racing this one binds it first too)."""
    database_id = store.database_id()
    database_names = store.bound_container()
    return Binding(database_id, identity(container), database_names, _marker(container))


def _marker(container: ContainerClient) -> str | None:
    try:
        properties = container.get_blob_client(blobs.BINDING_BLOB).get_blob_properties()
    except ResourceNotFoundError:
        return None
    return str(properties.metadata.get("database_id") or "")


def refuse_mismatch(pair: Binding) -> None:
    """ContainerBindingError when either half names something other than the other side."""
    name = pair.container.split("/", 1)[-1]
    if pair.database_names not in (None, pair.container):
        raise ContainerBindingError(
            f"database {pair.database_id} belongs to container {pair.database_names!r}, "
            f"not {pair.container!r}; refusing to sweep the wrong container"
        )
    if pair.container_names == "":
        raise ContainerBindingError(
            f"container {name!r} has a binding marker ({blobs.BINDING_BLOB}) that names no "
            "database; refusing to sweep until a person checks which database it belongs to "
            "and removes the marker"
        )
    if pair.container_names not in (None, pair.database_id):
        raise ContainerBindingError(
            f"container {name!r} is bound to database {pair.container_names}, not to this "
            f"one ({pair.database_id}); refusing to sweep with the wrong table"
        )


def why_unproven(store: DocumentStore, container: ContainerClient) -> str | None:
    """Why the pair cannot be shown to belong together, or None when it can."""
    sample = store.sample_blobs(EVIDENCE_SAMPLE)
    if not sample:
        if _holds_protocol_blobs(container):
            return "the database has no rows or records but the container holds blobs"
        return None
    found = 0
    # The lookups are reads, sent at once; their answers are judged in the sample's order, so
    # the verdict (and the first reason given) is the one a lookup after another would give.
    with ThreadPoolExecutor(EVIDENCE_LOOKUPS, thread_name_prefix="binding") as pool:
        answers = pool.map(lambda item: _exists(container, item[0]), sample)
        for (blob_name, ready), present in zip(sample, answers, strict=True):
            if present is None:
                continue
            if ready and not present:
                return f"a Ready row's blob ({blob_name}) is not in this container"
            found += present
    if not found:
        return f"none of the {len(sample)} newest rows and records has its blob in this container"
    return None


def _exists(container: ContainerClient, blob_name: str) -> bool | None:
    """Whether the blob exists; None for a name the service cannot take (no evidence)."""
    try:
        return blobs.state_of(container.get_blob_client(blob_name)) is not None
    except ValueError:
        return None  # the SDK refuses an empty name before sending anything
    except HttpResponseError as error:
        if error.status_code == 400:
            return None
        raise


def _holds_protocol_blobs(container: ContainerClient) -> bool:
    page = container.list_blobs(results_per_page=5).by_page()
    return any(not item.name.startswith(INTERNAL_PREFIX) for item in next(page, []))


def ensure_bound(store: DocumentStore, container: ContainerClient) -> None:
    """Let a sweep go on only on a bound pair, binding it when one half already names the
    other or when the pair is proven to belong together; ContainerBindingError otherwise
    (UnboundPairError, naming the command that binds, when nothing proves it)."""
    pair = read_binding(store, container)
    refuse_mismatch(pair)
    if pair.bound:
        return
    if pair.unbound:
        reason = why_unproven(store, container)
        if reason is not None:
            name = pair.container.split("/", 1)[-1]
            raise UnboundPairError(
                f"database {pair.database_id} and container {name!r} are not bound, and "
                f"this first sweep cannot prove they belong together: {reason}. Nothing was "
                f"changed. If they do belong together, bind them: {BIND_COMMAND} --db URL "
                f"--container {name}"
            )
    _write_both(store, container, pair)


def _write_both(store: DocumentStore, container: ContainerClient, pair: Binding) -> None:
    bound = blobs.bind(container, pair.database_id)
    refuse_mismatch(Binding(pair.database_id, pair.container, None, bound))
    if store.bind_container(pair.container) != pair.container:
        raise ContainerBindingError(
            f"database {pair.database_id} was just bound to container "
            f"{store.bound_container()!r} by another sweep, not {pair.container!r}"
        )


def bind(store: DocumentStore, container: ContainerClient) -> Binding:
    """The operator's step: bind both halves to each other, refused when either names another."""
    pair = read_binding(store, container)
    refuse_mismatch(pair)
    _write_both(store, container, pair)
    return read_binding(store, container)


def unbind(store: DocumentStore, container: ContainerClient) -> Binding:
    """Remove the halves that name the other side; a half naming a third party is kept (and
    shows in the answer)."""
    pair = read_binding(store, container)
    blobs.unbind(container, pair.database_id)
    store.unbind_container(pair.container)
    return read_binding(store, container)
