"""A stack deployed by an earlier layout of the program upgrades in place: every resource it has
keeps its identity, by its URN or by an alias to it, so `pulumi up` updates instead of replacing.

`earlier_urns.txt` lists the URNs the program registered before it was built over
`SafetyNetStorage` (commit 19cf8e2), with `EVERYTHING`, by the engine's URN rule (the harness's
`make_urn`). Regenerate it only from that layout: `python -m tests.infra.test_earlier_urns`
run at 19cf8e2 prints it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from tests.infra.harness import NETWORK_GROUP, StackRun, run_stack

EARLIER: Final = Path(__file__).with_name("earlier_urns.txt")
EVERYTHING: Final[Mapping[str, object]] = {
    "uploaderPrincipalIds": ["00000000-0000-0000-0000-000000000001"],
    "readerPrincipalIds": ["00000000-0000-0000-0000-000000000002"],
    "verifierPrincipalIds": ["00000000-0000-0000-0000-000000000003"],
    "alertEmails": ["oncall@example.com"],
    "alertWebhooks": ["https://hooks.example.com/safetynet"],
    "privateEndpointSubnetId": (
        f"{NETWORK_GROUP}/providers/Microsoft.Network/virtualNetworks/hub-vnet/subnets/endpoints"
    ),
    "versioning": True,
}
"""Every optional resource on: principals of each kind, alert receivers, the private endpoint."""


def _earlier() -> list[str]:
    return [line for line in EARLIER.read_text(encoding="utf-8").splitlines() if line]


def _claims(run: StackRun) -> Counter[str]:
    """How many resources of the run answer to each URN, as their own or as an alias."""
    return Counter(urn for res in run.resources for urn in {res.urn, *res.aliases})


def _type_of(urn: str) -> str:
    return urn.split("::")[2].split("$")[-1]


def test_every_resource_of_the_earlier_layout_is_claimed_by_exactly_one_resource() -> None:
    run = run_stack(EVERYTHING)
    claims = _claims(run)
    earlier = _earlier()
    assert len(earlier) > 50
    assert [urn for urn in earlier if claims[urn] != 1] == []


def test_each_claim_is_made_by_a_resource_of_the_same_type() -> None:
    run = run_stack(EVERYTHING)
    earlier = set(_earlier())
    mismatched = [
        (res.urn, urn)
        for res in run.resources
        for urn in res.aliases & earlier
        if _type_of(urn) != res.type
    ]
    assert mismatched == []


def test_no_alias_names_another_resource_of_the_same_run() -> None:
    run = run_stack(EVERYTHING)
    own = {res.urn for res in run.resources}
    assert [alias for res in run.resources for alias in res.aliases if alias in own] == []


if __name__ == "__main__":
    for registered in run_stack(EVERYTHING).resources:
        print(registered.urn)
