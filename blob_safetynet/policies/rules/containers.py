"""Containers: every one private."""

from __future__ import annotations

from blob_safetynet.policies.rules.base import (
    Remediation,
    Rule,
    Severity,
    Verdict,
    failed,
    passed,
    unknown,
)
from blob_safetynet.policies.rules.model import UNKNOWN, Account, Facet, Thresholds

PRIVATE = (None, "None")


def _check_private(account: Account, _: Thresholds) -> Verdict:
    assert account.containers is not UNKNOWN
    if any(c.public_access is UNKNOWN for c in account.containers):
        return unknown("a container's public access level is not known yet")
    public = [
        f"{c.name} ({c.public_access})"
        for c in account.containers
        if c.public_access not in PRIVATE
    ]
    if public:
        return failed("public containers: " + ", ".join(public))
    return passed(f"{len(account.containers)} container(s), all private")


CONTAINERS_PRIVATE = Rule(
    id="SN-CONTAINERS-PRIVATE",
    title="Every container is private",
    severity=Severity.HIGH,
    rationale=(
        "A container with public access Blob or Container serves its blobs anonymously as soon "
        "as the account allows it; private containers keep a second lock shut."
    ),
    remediation=Remediation(
        account="make each container private: container `publicAccess: None` (`az storage container-rm update --storage-account <account> -g <group> -n <container> --public-access off`)",
        pulumi="remove `publicAccess` or set it to None on each BlobContainer",
    ),
    facets=frozenset({Facet.CONTAINERS}),
    check=_check_private,
    references=("https://learn.microsoft.com/azure/storage/blobs/anonymous-read-access-configure",),
)
