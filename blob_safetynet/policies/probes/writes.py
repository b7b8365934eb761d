"""The protocol's write guarantees: create-only uploads, one winner, tag-guarded delete and seal.

Expected answers, from Microsoft's REST reference:
- If-None-Match: * on an existing blob: the write is refused (409 BlobAlreadyExists on Azurite;
  Azure answers 409 or 412 ConditionNotMet), https://learn.microsoft.com/rest/api/storageservices/specifying-conditional-headers-for-blob-service-operations
  and Put Block List, https://learn.microsoft.com/rest/api/storageservices/put-block-list
- x-ms-if-tags that does not hold on Delete Blob or Set Blob Tags: 412 ConditionNotMet,
  https://learn.microsoft.com/rest/api/storageservices/delete-blob and
  https://learn.microsoft.com/rest/api/storageservices/set-blob-tags
"""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobBlock, BlobClient

from blob_safetynet.policies.probes.base import (
    CONDITION_NOT_MET,
    EXISTS_REFUSALS,
    Observation,
    Probe,
    Target,
    describe_refusal,
    failed,
    not_verifiable,
    passed,
    payload,
    put_pending_if_missing,
    status_and_code,
)
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG, tag_condition

CONCURRENT_WRITERS = 20
CONDITIONAL_HEADERS_DOC = "https://learn.microsoft.com/rest/api/storageservices/specifying-conditional-headers-for-blob-service-operations"


def _create_only(blob: BlobClient, data: bytes) -> HttpResponseError | None:
    """One create-only Put Blob; the refusal, or None when it wrote."""
    try:
        put_pending_if_missing(blob, data)
    except HttpResponseError as error:
        return error
    return None


def _staged_create_only(blob: BlobClient, data: bytes) -> HttpResponseError | None:
    """Two staged blocks and a create-only Put Block List; the refusal, or None when it wrote."""
    half = len(data) // 2
    ids = [base64.b64encode(f"block-{i:04d}".encode()).decode() for i in range(2)]
    for block_id, part in zip(ids, (data[:half], data[half:]), strict=True):
        blob.stage_block(block_id, part)
    try:
        blob.commit_block_list(
            [BlobBlock(block_id) for block_id in ids],
            tags={STATE_TAG: PENDING},
            match_condition=MatchConditions.IfMissing,
        )
    except HttpResponseError as error:
        return error
    return None


def check_create_only(target: Target) -> Observation:
    blob = target.blob("create-only")
    original = payload("original")
    target.create(blob, original)
    findings: list[str] = []
    for how, write in (
        ("single Put Blob", _create_only),
        ("staged Put Block List", _staged_create_only),
    ):
        refusal = write(blob, payload(f"overwrite by {how}"))
        stored = blob.download_blob().readall()
        if refusal is None or stored != original:
            answer = "accepted" if refusal is None else describe_refusal(refusal)
            return failed(
                f"a create-only {how} on an existing blob was {answer} and the bytes "
                f"{'changed' if stored != original else 'stayed'}: If-None-Match: * is not enforced"
            )
        if status_and_code(refusal) not in EXISTS_REFUSALS:
            return not_verifiable(
                f"the create-only {how} was refused for another reason "
                f"({describe_refusal(refusal)}), not as an existing blob"
            )
        findings.append(f"{how} refused with {describe_refusal(refusal)}")
    return passed("; ".join(findings) + "; bytes unchanged")


CREATE_ONLY = Probe(
    id="SNV-CREATE-ONLY",
    title="A create-only upload never overwrites",
    proves=(),
    action=(
        "creates a probe blob, then tries a create-only Put Blob and a staged create-only Put "
        "Block List to the same name; both must be refused as existing (409 BlobAlreadyExists or "
        "412 ConditionNotMet) and the bytes stay the same"
    ),
    reference=CONDITIONAL_HEADERS_DOC,
    requests=7,
    on_emulator="PASS (409 BlobAlreadyExists)",
    on_live="PASS with 409 BlobAlreadyExists or 412 ConditionNotMet; FAIL if an overwrite lands",
    run=check_create_only,
)


def check_concurrent_create(target: Target) -> Observation:
    blob = target.blob("concurrent-create")
    payloads = [payload(f"writer {i}") for i in range(CONCURRENT_WRITERS)]
    # In the ledger before the race: an interrupt during it must not leave a winner behind.
    target.ledger.created(blob.blob_name)
    with ThreadPoolExecutor(CONCURRENT_WRITERS) as pool:
        refusals = list(pool.map(lambda data: _create_only(blob, data), payloads))
    winners = [data for data, refusal in zip(payloads, refusals, strict=True) if refusal is None]
    if not winners:
        target.ledger.forget(blob.blob_name)
    other = [r for r in refusals if r is not None and status_and_code(r) not in EXISTS_REFUSALS]
    if len(winners) > 1:
        return failed(f"{len(winners)} of {CONCURRENT_WRITERS} create-only uploads of one name won")
    if other:
        return not_verifiable(
            f"{len(other)} upload(s) failed otherwise (first: {describe_refusal(other[0])})"
        )
    if not winners:
        return not_verifiable(f"none of {CONCURRENT_WRITERS} create-only uploads won")
    stored = blob.download_blob().readall()
    if stored != winners[0]:
        return failed("the stored bytes are not the winner's: a loser overwrote them")
    return passed(
        f"1 of {CONCURRENT_WRITERS} concurrent create-only uploads won, "
        f"{CONCURRENT_WRITERS - 1} refused as existing (409 BlobAlreadyExists / 412 "
        "ConditionNotMet); the winner's bytes are stored"
    )


CONCURRENT_CREATE = Probe(
    id="SNV-CONCURRENT-CREATE",
    title="Concurrent create-only uploads of one name have exactly one winner",
    proves=(),
    action=f"sends {CONCURRENT_WRITERS} create-only uploads of one probe name at once",
    reference=CONDITIONAL_HEADERS_DOC,
    requests=CONCURRENT_WRITERS + 1,
    on_emulator="PASS",
    on_live="PASS: one winner, 19 x 409 BlobAlreadyExists / 412 ConditionNotMet",
    run=check_concurrent_create,
)


def check_tag_guarded_delete(target: Target) -> Observation:
    pending = target.blob("guard-pending")
    committed = target.blob("guard-committed")
    kept = payload("committed")
    target.create(pending, payload("pending"))
    target.create(committed, kept)
    target.set_state(committed, PENDING, COMMITTED)
    try:
        target.delete(pending, PENDING)
    except HttpResponseError as error:
        return failed(
            f"a pending blob was not deleted under the pending guard: {describe_refusal(error)}"
        )
    if pending.exists():
        target.ledger.tagged(pending.blob_name, PENDING)
        return failed("the pending blob's guarded delete was answered OK, but it is still there")
    try:
        committed.delete_blob(if_tags_match_condition=tag_condition(PENDING))
    except HttpResponseError as error:
        refusal = error
    else:
        target.ledger.deleted(committed.blob_name)
        return failed("a committed blob was deleted under the pending tag guard")
    status, code = status_and_code(refusal)
    try:
        stored = committed.download_blob().readall()
    except ResourceNotFoundError:
        return failed(f"the delete answered {status} {code} but the committed blob is gone")
    if stored != kept:
        return failed("the committed blob's bytes changed")
    if (status, code) != CONDITION_NOT_MET:
        return not_verifiable(
            f"the guarded delete was refused with {status} {code}, not 412 ConditionNotMet"
        )
    return passed(
        f"pending blob deleted (gone); committed blob refused with {status} {code}, intact"
    )


TAG_GUARDED_DELETE = Probe(
    id="SNV-TAG-GUARDED-DELETE",
    title="A tag-guarded delete removes pending blobs only",
    proves=(),
    action=(
        "deletes a pending probe blob and a committed one, each under x-ms-if-tags "
        "\"state\" = 'pending'; the first must go, the second must be refused with 412 ConditionNotMet and stay"
    ),
    reference="https://learn.microsoft.com/rest/api/storageservices/delete-blob",
    requests=7,
    on_emulator="PASS (412 ConditionNotMet)",
    on_live="PASS; FAIL if a committed blob goes",
    run=check_tag_guarded_delete,
)


def check_conditional_seal(target: Target) -> Observation:
    blob = target.blob("seal")
    target.create(blob, payload("seal"))
    target.set_state(blob, PENDING, RETIRED)
    try:
        blob.set_blob_tags({STATE_TAG: COMMITTED}, if_tags_match_condition=tag_condition(PENDING))
    except HttpResponseError as error:
        refusal: HttpResponseError | None = error
    else:
        refusal = None
    state = blob.get_blob_tags().get(STATE_TAG)
    if refusal is not None:
        status, code = status_and_code(refusal)
        if (status, code) == CONDITION_NOT_MET and state == RETIRED:
            return passed(
                f"a seal on a retired blob was refused with {status} {code}; still retired"
            )
        if state != RETIRED:
            return failed(f"the seal was refused ({status} {code}) yet the state became {state!r}")
        return not_verifiable(f"the seal was refused for another reason: {status} {code}")
    target.ledger.tagged(blob.blob_name, str(state))
    if target.emulator_host is not None:
        return not_verifiable(
            f"Set Blob Tags ignored x-ms-if-tags (the retired blob is now {state!r}); "
            f"{target.emulator_reason()}: Azurite does not evaluate the condition, Azure does"
        )
    return failed(
        f"a seal under \"state\" = 'pending' went through on a retired blob (now {state!r})"
    )


CONDITIONAL_SEAL = Probe(
    id="SNV-CONDITIONAL-SEAL",
    title="The seal is refused on a blob that is not pending",
    proves=(),
    action=(
        "retires a probe blob, then tries the seal (Set Blob Tags state=committed under "
        "x-ms-if-tags \"state\" = 'pending'); it must be refused with 412 ConditionNotMet and the tag stay retired"
    ),
    reference="https://learn.microsoft.com/rest/api/storageservices/set-blob-tags",
    requests=4,
    on_emulator="NOT_VERIFIABLE: Azurite ignores x-ms-if-tags on Set Blob Tags",
    on_live="PASS with 412 ConditionNotMet; FAIL if the seal goes through",
    run=check_conditional_seal,
)
