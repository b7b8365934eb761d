"""Who can reach the account: the public endpoint, its firewall, private endpoints."""

from __future__ import annotations

from blob_safetynet.policies.rules.base import (
    Remediation,
    Rule,
    Severity,
    Verdict,
    cis,
    failed,
    mcsb,
    passed,
    settings_of,
    unknown,
)
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    Facet,
    Network,
    Thresholds,
    arm_fold,
)

NETWORK_SECURITY = "https://learn.microsoft.com/azure/storage/common/storage-network-security"
CLOSED_PUBLIC_ACCESS = ("Disabled", "SecuredByPerimeter")
"""The `publicNetworkAccess` values that close the public endpoint (absent means Enabled)."""
DENY = "Deny"
TRUSTED_BYPASS = "AzureServices"


def _network(account: Account) -> Network | None:
    """The account's network settings; None when they are not known."""
    found = settings_of(account).network
    return None if found is UNKNOWN else found


def _check_public_network(account: Account, _: Thresholds) -> Verdict:
    network = _network(account)
    access = UNKNOWN if network is None else network.public_network_access
    if access is UNKNOWN:
        return unknown("public network access is not known yet")
    if arm_fold(access) not in {arm_fold(value) for value in CLOSED_PUBLIC_ACCESS}:
        return failed(f"public network access is {access} (absent means Enabled)")
    return passed(f"public network access is {access}")


PUBLIC_NETWORK_ACCESS = Rule(
    id="SN-PUBLIC-NETWORK-ACCESS",
    title="Public network access is disabled",
    severity=Severity.MEDIUM,
    rationale=(
        "With the public endpoint open, a leaked token or SAS works from any network; "
        "disabled (or a network security perimeter) leaves only private endpoints."
    ),
    remediation=Remediation(
        account="close the public endpoint: account `publicNetworkAccess: Disabled` (`az storage account update -n <account> -g <group> --public-network-access Disabled`) and reach the account through a private endpoint",
        pulumi=(
            "set `publicNetworkAccess: Disabled` (or SecuredByPerimeter) on the StorageAccount and "
            "reach it through a private endpoint"
        ),
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_public_network,
    controls=(*cis("4.6"), *mcsb("NS-2")),
    references=(
        "https://learn.microsoft.com/azure/storage/common/storage-network-security-set-default-access",
    ),
)


def _check_default_deny(account: Account, _: Thresholds) -> Verdict:
    network = _network(account)
    action = UNKNOWN if network is None else network.default_action
    if action is UNKNOWN:
        return unknown("the firewall's default action is not known yet")
    if arm_fold(action) != arm_fold(DENY):
        return failed(f"the firewall's default action is {action} (absent means Allow)")
    return passed("the firewall denies by default")


NETWORK_DEFAULT_DENY = Rule(
    id="SN-NETWORK-DEFAULT-DENY",
    title="The firewall denies by default",
    severity=Severity.MEDIUM,
    rationale=(
        "By default an account accepts connections from any network; a Deny default admits "
        "only the networks and services named in its rules."
    ),
    remediation=Remediation(
        account="deny by default in the firewall: account `networkAcls.defaultAction: Deny` (`az storage account update -n <account> -g <group> --default-action Deny`)",
        pulumi="set `networkRuleSet.defaultAction: Deny` on the StorageAccount",
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_default_deny,
    controls=(*cis("4.7"), *mcsb("NS-2")),
    references=(NETWORK_SECURITY,),
)


def _check_trusted_services(account: Account, _: Thresholds) -> Verdict:
    network = _network(account)
    bypass = UNKNOWN if network is None else network.bypass
    if bypass is UNKNOWN:
        return unknown("the firewall's bypass list is not known yet")
    if arm_fold(TRUSTED_BYPASS) not in {arm_fold(part) for part in bypass}:
        return failed(f"trusted Azure services are not let through (bypass {','.join(bypass)})")
    return passed("trusted Azure services pass the firewall")


TRUSTED_SERVICES = Rule(
    id="SN-TRUSTED-SERVICES",
    title="Trusted Azure services pass the firewall",
    severity=Severity.LOW,
    rationale=(
        "Behind a Deny firewall, Azure services the account relies on (Defender, backup, "
        "diagnostics, Event Grid) reach it only through the trusted services exception."
    ),
    remediation=Remediation(
        account="let trusted Azure services through the firewall: account `networkAcls.bypass` includes AzureServices (`az storage account update -n <account> -g <group> --bypass AzureServices`)",
        pulumi="set `networkRuleSet.bypass` to include AzureServices on the StorageAccount",
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_trusted_services,
    advisory=True,
    controls=cis("4.8"),
    references=(f"{NETWORK_SECURITY}#grant-access-to-trusted-azure-services",),
)


def _check_private_endpoint(account: Account, _: Thresholds) -> Verdict:
    assert account.private_endpoints is not UNKNOWN
    approved = sum(status == "Approved" for status in account.private_endpoints)
    if approved:
        return passed(f"{approved} approved private endpoint connection(s)")
    if UNKNOWN in account.private_endpoints:
        return unknown("a private endpoint connection's state is not known yet")
    others = ", ".join(str(s) for s in account.private_endpoints) or "none"
    return failed(f"no approved private endpoint connection (found: {others})")


PRIVATE_ENDPOINT = Rule(
    id="SN-PRIVATE-ENDPOINT",
    title="The account is reached through a private endpoint",
    severity=Severity.MEDIUM,
    rationale=(
        "A private endpoint gives the account an address in the application's virtual network, "
        "so traffic to it never crosses the internet and the public endpoint can close."
    ),
    remediation=Remediation(
        account="add a private endpoint for the blob service: a Microsoft.Network/privateEndpoints whose connection names the account's id with `groupIds: [blob]` (`az network private-endpoint create -g <group> -n <name> --vnet-name <vnet> --subnet <subnet> --private-connection-resource-id <account id> --group-id blob --connection-name <name>`)",
        pulumi=(
            "add a network PrivateEndpoint whose privateLinkServiceConnections name the "
            "StorageAccount's id with groupIds [blob]"
        ),
    ),
    facets=frozenset({Facet.PRIVATE_ENDPOINTS}),
    check=_check_private_endpoint,
    controls=(*cis("4.9"), *mcsb("NS-2")),
    references=("https://learn.microsoft.com/azure/storage/common/storage-private-endpoints",),
)
