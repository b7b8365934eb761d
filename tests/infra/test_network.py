"""Network options: each combination the docs offer, the Function's settings under it, and the
combinations refused because they would leave the sweeper (or everyone) without a way in."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.infra.config import ConfigError, parse
from blob_safetynet.infra.network import BLOB_ZONE
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import FunctionSettings
from tests.infra.conftest import RunFactory
from tests.infra.harness import (
    FIT_SUBNET,
    NETWORK_GROUP,
    RAW_DEFAULTS,
    SWEEPER_SUBNET_ID,
    UNREADABLE,
    StackRun,
    run_stack,
)

ACCOUNT = "azure-native:storage:StorageAccount"
APP = "azure-native:web:WebApp"
ENDPOINT = "azure-native:network:PrivateEndpoint"
ZONE = "azure-native:privatedns:PrivateZone"
LINK = "azure-native:privatedns:VirtualNetworkLink"
ZONE_GROUP = "azure-native:network:PrivateDnsZoneGroup"
APPS_VNET = f"{NETWORK_GROUP}/providers/Microsoft.Network/virtualNetworks/apps-vnet"
APP_SUBNET = f"{APPS_VNET}/subnets/uploaders"
ENDPOINT_VNET = f"{NETWORK_GROUP}/providers/Microsoft.Network/virtualNetworks/hub-vnet"
ENDPOINT_SUBNET = f"{ENDPOINT_VNET}/subnets/private-endpoints"
OFFICE = "203.0.113.0/24"

FIREWALL: Mapping[str, object] = {
    "allowedIpRanges": [OFFICE, "198.51.100.7"],
    "allowedSubnetIds": [APP_SUBNET],
}
PRIVATE: Mapping[str, object] = {
    "publicNetworkAccess": "Disabled",
    "privateEndpointSubnetId": ENDPOINT_SUBNET,
}
PRIVATE_SAME_VNET: Mapping[str, object] = {
    "publicNetworkAccess": "Disabled",
    "privateEndpointSubnetId": f"{APPS_VNET}/subnets/private-endpoints",
}
OPEN: Mapping[str, object] = {"networkDefaultAction": "Allow", "sweeperSubnetId": ""}
COMBINATIONS = {
    "firewall": FIREWALL,
    "private-endpoint": PRIVATE,
    "private-endpoint-same-vnet": PRIVATE_SAME_VNET,
    "private-endpoint-beside-firewall": {**FIREWALL, "privateEndpointSubnetId": ENDPOINT_SUBNET},
    "open": OPEN,
}


def data_account(run: StackRun) -> dict[str, Any]:
    return run.one(ACCOUNT, "safetynet").inputs


def data_zone_configs(run: StackRun) -> list[dict[str, Any]]:
    group = run.one(ZONE_GROUP, "safetynet-blob-zone-group")
    return list(group.inputs["privateDnsZoneConfigs"])


def firewall_subnets(account: Mapping[str, Any]) -> list[str]:
    return [
        rule["virtualNetworkResourceId"]
        for rule in account["networkRuleSet"]["virtualNetworkRules"]
    ]


def test_the_firewall_allows_the_configured_ranges_subnets_and_the_sweeper(
    run: RunFactory,
) -> None:
    """Default Deny lets in the listed public ranges, the listed subnets and the sweeper's."""
    account = data_account(run(FIREWALL))
    rules = account["networkRuleSet"]
    assert rules["defaultAction"] == "Deny"
    assert [(rule["iPAddressOrRange"], rule["action"]) for rule in rules["ipRules"]] == [
        (OFFICE, "Allow"),
        ("198.51.100.7", "Allow"),
    ]
    assert firewall_subnets(account) == [APP_SUBNET, SWEEPER_SUBNET_ID]


def test_the_sweepers_app_joins_its_subnet_and_its_runtime_account_allows_only_that(
    run: RunFactory,
) -> None:
    """Flex Consumption VNet integration is the sweeper's way out; its host storage lets in that
    subnet and no application range."""
    result = run(FIREWALL)
    assert result.one(APP).inputs["virtualNetworkSubnetId"] == SWEEPER_SUBNET_ID
    runtime = result.one(ACCOUNT, "safetynet-sweeper-runtime").inputs
    assert runtime["networkRuleSet"]["defaultAction"] == "Deny"
    assert runtime["networkRuleSet"]["ipRules"] == []
    assert firewall_subnets(runtime) == [SWEEPER_SUBNET_ID]


def test_a_private_endpoint_gets_its_zone_links_and_zone_group(run: RunFactory) -> None:
    """The blob endpoint, the privatelink.blob.core.windows.net zone linked to the endpoint's
    and the sweeper's networks, and the zone group that writes the endpoint's record."""
    result = run(PRIVATE)
    assert data_account(result)["publicNetworkAccess"] == "Disabled"
    endpoint = result.one(ENDPOINT, "safetynet-blob-endpoint").inputs
    assert endpoint["subnet"]["id"] == ENDPOINT_SUBNET
    (connection,) = endpoint["privateLinkServiceConnections"]
    assert connection["groupIds"] == ["blob"]
    assert connection["privateLinkServiceId"] == result.outputs["accountId"]
    assert result.one(ZONE).inputs["privateZoneName"] == BLOB_ZONE
    linked = sorted(res.inputs["virtualNetwork"]["id"] for res in result.of_type(LINK))
    assert linked == sorted([ENDPOINT_VNET, APPS_VNET])
    assert all(res.inputs["registrationEnabled"] is False for res in result.of_type(LINK))
    (config,) = data_zone_configs(result)
    assert (
        config["privateDnsZoneId"].endswith(f"/{ZONE.split(':')[-1]}/private-zone")
        or config["privateDnsZoneId"]
    )


def test_one_network_holding_both_subnets_gets_one_zone_link(run: RunFactory) -> None:
    """The endpoint and the sweeper in one virtual network: the zone is linked once."""
    (link,) = run(PRIVATE_SAME_VNET).of_type(LINK)
    assert link.inputs["virtualNetwork"]["id"] == APPS_VNET


def test_no_private_endpoint_resources_without_its_subnet(stack: StackRun) -> None:
    """The defaults register no endpoint, zone, link or zone group."""
    assert not [res for res in stack.resources if res.type in {ENDPOINT, ZONE, LINK, ZONE_GROUP}]


def test_an_open_account_leaves_the_app_outside_any_network(run: RunFactory) -> None:
    """networkDefaultAction Allow (an explicit choice) needs no subnet; the app joins none."""
    result = run(OPEN)
    assert data_account(result)["networkRuleSet"]["defaultAction"] == "Allow"
    assert result.one(APP).inputs.get("virtualNetworkSubnetId") is None


@pytest.mark.parametrize("overrides", COMBINATIONS.values(), ids=list(COMBINATIONS))
def test_the_functions_settings_work_under_each_network_combination(
    run: RunFactory, overrides: Mapping[str, object]
) -> None:
    """The sweeper's loader accepts the app settings and targets the account's public blob name
    (which a linked private zone resolves to the endpoint inside the network), from the subnet
    the app joins, which the data account's firewall allows."""
    result = run(overrides)
    joined = result.one(APP).inputs.get("virtualNetworkSubnetId")
    assert joined == (None if overrides is OPEN else SWEEPER_SUBNET_ID)
    assert joined is None or joined in firewall_subnets(data_account(result))
    env = {
        key: str(value)
        for key, value in result.one("azure-native:web:WebAppApplicationSettings")
        .inputs["properties"]
        .items()
    }
    env[appsettings.DB_URL.name] = RAW_DEFAULTS["sweeperDatabaseUrl"]  # the resolved reference
    loaded = FunctionSettings.from_environment(env)
    assert loaded.account_url == result.outputs["blobEndpoint"]
    assert loaded.account_url.endswith(".blob.core.windows.net/")


@pytest.mark.parametrize(
    ("overrides", "key", "problem"),
    [
        ({"sweeperSubnetId": ""}, "sweeperSubnetId", "is missing"),
        ({"publicNetworkAccess": "Disabled"}, "privateEndpointSubnetId", "is missing"),
        (
            {"networkDefaultAction": "Allow", "sweeperSubnetId": "", **PRIVATE},
            "sweeperSubnetId",
            "is missing",
        ),
        ({"allowedIpRanges": ["10.1.0.0/16"]}, "allowedIpRanges", "private range"),
        ({"allowedIpRanges": ["203.0.113.8/31"]}, "allowedIpRanges", "/31 or /32"),
        ({"allowedIpRanges": ["somewhere"]}, "allowedIpRanges", "not an IPv4"),
        ({"allowedSubnetIds": ["apps-vnet/uploaders"]}, "allowedSubnetIds", "not a subnet"),
        ({"allowedSubnetIds": [APP_SUBNET, APP_SUBNET.upper()]}, "allowedSubnetIds", "twice"),
        ({"sweeperSubnetId": APPS_VNET}, "sweeperSubnetId", "not a subnet"),
        ({"networkDefaultAction": "deny"}, "networkDefaultAction", "not allowed"),
        ({"publicNetworkAccess": "SecuredByPerimeter"}, "publicNetworkAccess", "not allowed"),
    ],
)
def test_a_network_setting_that_would_shut_the_sweeper_out_or_is_malformed_is_refused(
    overrides: Mapping[str, object], key: str, problem: str
) -> None:
    """Each refusal names its key and what is wrong, before anything is deployed."""
    with pytest.raises(ConfigError, match=problem) as caught:
        parse({**RAW_DEFAULTS, **overrides})
    assert caught.value.key == key


def registered_types(run: StackRun) -> set[tuple[str, str]]:
    return {(res.type, res.parent_type) for res in run.resources}


def test_the_private_endpoint_lives_in_a_component_of_the_data_account(run: RunFactory) -> None:
    """Its resources are children of `safetynet:network:BlobPrivateEndpoint`, itself a child of
    the data account, and of the sweeper app for the runtime account's endpoint
    (docs/deployment.md lists them)."""
    types = registered_types(run(PRIVATE)) - registered_types(run())
    parent = "safetynet:network:BlobPrivateEndpoint"
    assert types == {
        (parent, "safetynet:storage:DataAccount"),
        (parent, "safetynet:sweeper:SweeperApp"),
        (ENDPOINT, parent),
        (ZONE, parent),
        (LINK, parent),
        (ZONE_GROUP, parent),
    }


HUB_ZONE = (
    "/subscriptions/00000000-0000-0000-0000-0000000000dd/resourceGroups/hub-dns/providers/"
    f"Microsoft.Network/privateDnsZones/{BLOB_ZONE}"
)


def test_a_hub_zone_given_by_id_is_used_and_no_zone_or_link_is_created(run: RunFactory) -> None:
    """With privateDnsZoneId (a landing zone's hub zone, another subscription) the stack creates
    no zone and no virtual network links, and the endpoint's zone group writes into that zone."""
    result = run({**PRIVATE, "privateDnsZoneId": HUB_ZONE})

    assert result.of_type(ZONE) == []
    assert result.of_type(LINK) == []
    (config,) = data_zone_configs(result)
    assert config["privateDnsZoneId"] == HUB_ZONE
    assert result.one(ENDPOINT, "safetynet-blob-endpoint").inputs["subnet"]["id"] == ENDPOINT_SUBNET


def test_without_a_hub_zone_the_zone_group_uses_the_stacks_own_zone(run: RunFactory) -> None:
    """Without privateDnsZoneId the zone group names the zone the stack created."""
    result = run(PRIVATE)
    (config,) = data_zone_configs(result)
    assert config["privateDnsZoneId"].endswith(f"/{result.one(ZONE).name}")


def test_link_names_follow_the_network_not_its_place_in_the_list(run: RunFactory) -> None:
    """Swapping which network holds the endpoint and which the sweeper keeps each network's
    link under the same name, so neither link is replaced."""
    swapped = {
        "publicNetworkAccess": "Disabled",
        "privateEndpointSubnetId": f"{APPS_VNET}/subnets/private-endpoints",
        "sweeperSubnetId": f"{ENDPOINT_VNET}/subnets/sweeper",
    }
    before = {res.name: res.inputs["virtualNetwork"]["id"] for res in run(PRIVATE).of_type(LINK)}
    after = {res.name: res.inputs["virtualNetwork"]["id"] for res in run(swapped).of_type(LINK)}

    assert len(before) == 2
    assert before == after


def test_a_link_keeps_its_positional_name_as_an_alias(run: RunFactory) -> None:
    """A stack whose links were named by position (link-0 the endpoint's network, link-1 the
    sweeper's) finds them under their new names through aliases, so `pulumi up` updates."""
    links = {res.inputs["virtualNetwork"]["id"]: res for res in run(PRIVATE).of_type(LINK)}
    for position, vnet in enumerate([ENDPOINT_VNET, APPS_VNET]):
        link = links[vnet]
        expected = link.urn.rsplit("::", 1)[0] + f"::safetynet-blob-link-{position}"
        assert expected in link.aliases


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"privateDnsZoneId": HUB_ZONE}, "without privateEndpointSubnetId"),
        (
            {**PRIVATE, "privateDnsZoneId": HUB_ZONE.replace("blob", "file")},
            "not the resource id of a blob private DNS zone",
        ),
        ({**PRIVATE, "privateDnsZoneId": BLOB_ZONE}, "not the resource id"),
    ],
    ids=["no-endpoint", "file-zone", "bare-name"],
)
def test_a_hub_zone_that_cannot_serve_the_endpoint_is_refused(
    overrides: Mapping[str, object], problem: str
) -> None:
    """A zone id without an endpoint to register, or not a blob privatelink zone's id, is
    refused naming privateDnsZoneId."""
    with pytest.raises(ConfigError, match=problem) as caught:
        parse({**RAW_DEFAULTS, **overrides})
    assert caught.value.key == "privateDnsZoneId"


ELSEWHERE_SUBNET = (
    "/subscriptions/00000000-0000-0000-0000-0000000000dd/resourceGroups/hub-net/providers/"
    "Microsoft.Network/virtualNetworks/hub/subnets/apps"
)


def test_each_configured_subnet_in_the_deploying_subscription_is_read_once(
    run: RunFactory,
) -> None:
    """The sweeper's subnet and the allowed subnets are read with getSubnet before anything
    joins or allows them; one in another subscription is not read."""
    result = run({"allowedSubnetIds": [APP_SUBNET, ELSEWHERE_SUBNET]})
    assert sorted(result.subnet_reads) == sorted([APP_SUBNET, SWEEPER_SUBNET_ID])


@pytest.mark.parametrize(
    ("subnet", "answer", "key", "gap"),
    [
        (
            SWEEPER_SUBNET_ID,
            {"serviceEndpoints": [], "delegations": FIT_SUBNET["delegations"]},
            "sweeperSubnetId",
            "lacks the Microsoft.Storage service endpoint",
        ),
        (
            SWEEPER_SUBNET_ID,
            {"serviceEndpoints": FIT_SUBNET["serviceEndpoints"], "delegations": []},
            "sweeperSubnetId",
            "lacks the delegation to Microsoft.App/environments",
        ),
        (
            APP_SUBNET,
            {"serviceEndpoints": [{"service": "Microsoft.KeyVault"}], "delegations": []},
            "allowedSubnetIds",
            "lacks the Microsoft.Storage service endpoint",
        ),
        (
            SWEEPER_SUBNET_ID,
            {
                "serviceEndpoints": [{"service": "Microsoft.Storage"}],
                "delegations": FIT_SUBNET["delegations"],
            },
            "sweeperSubnetId",
            "lacks the Microsoft.KeyVault service endpoint",
        ),
    ],
    ids=["sweeper-no-endpoint", "sweeper-not-delegated", "allowed-no-endpoint", "sweeper-no-vault"],
)
def test_a_subnet_missing_what_the_stack_needs_stops_the_preview_naming_it(
    subnet: str, answer: Mapping[str, Any], key: str, gap: str
) -> None:
    """A subnet without the Microsoft.Storage service endpoint, or the sweeper's without the
    Microsoft.App/environments delegation, stops the program with the key, the subnet and
    the missing piece; an allowed subnet needs no delegation."""
    with pytest.raises(ConfigError) as caught:
        run_stack({"allowedSubnetIds": [APP_SUBNET]}, subnets={subnet: answer})
    assert caught.value.key == key
    assert f"subnet {subnet} {gap}" in str(caught.value)


def test_an_allowed_subnet_needs_no_delegation_and_a_global_endpoint_serves(
    run: RunFactory,
) -> None:
    """An allowed subnet with the Microsoft.Storage.Global endpoint and no delegation passes."""
    answer = {"serviceEndpoints": [{"service": "Microsoft.Storage.Global"}], "delegations": []}
    result = run_stack({"allowedSubnetIds": [APP_SUBNET]}, subnets={APP_SUBNET: answer})
    assert APP_SUBNET in firewall_subnets(data_account(result))


def test_a_subnet_the_deployer_cannot_read_is_named_and_left_unchecked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A refused read does not stop the program: a warning names the key and the subnet, and
    the app still joins it."""
    result = run_stack(subnets={SWEEPER_SUBNET_ID: UNREADABLE})
    assert result.one(APP).inputs["virtualNetworkSubnetId"] == SWEEPER_SUBNET_ID
    assert f"sweeperSubnetId: subnet {SWEEPER_SUBNET_ID} could not be read" in caplog.text


RUNTIME_ENDPOINT = "safetynet-sweeper-runtime-blob-endpoint"


@pytest.mark.parametrize("hub", [False, True], ids=["own-zone", "hub-zone"])
def test_a_private_data_account_makes_the_runtime_account_private_too(
    run: RunFactory, hub: bool
) -> None:
    """With publicNetworkAccess Disabled the runtime account has no public endpoint either, its
    firewall denies with no bypass, and a blob private endpoint in the same subnet registers in
    the same zone as the data account's (no second zone of the name)."""
    result = run({**PRIVATE, **({"privateDnsZoneId": HUB_ZONE} if hub else {})})
    runtime = result.one(ACCOUNT, "safetynet-sweeper-runtime").inputs
    assert runtime["publicNetworkAccess"] == "Disabled"
    assert runtime["networkRuleSet"]["defaultAction"] == "Deny"
    assert runtime["networkRuleSet"]["bypass"] == "None"
    endpoint = result.one(ENDPOINT, RUNTIME_ENDPOINT).inputs
    assert endpoint["subnet"]["id"] == ENDPOINT_SUBNET
    (connection,) = endpoint["privateLinkServiceConnections"]
    assert connection["groupIds"] == ["blob"]
    assert connection["privateLinkServiceId"] == result.outputs["accountId"].replace(
        result.outputs["accountName"], runtime["accountName"]
    )
    (runtime_zone,) = result.one(ZONE_GROUP, "safetynet-sweeper-runtime-blob-zone-group").inputs[
        "privateDnsZoneConfigs"
    ]
    (data_zone,) = data_zone_configs(result)
    assert runtime_zone["privateDnsZoneId"] == data_zone["privateDnsZoneId"]
    assert len(result.of_type(ZONE)) == (0 if hub else 1)


def test_a_public_data_account_leaves_the_runtime_account_behind_its_firewall(
    stack: StackRun,
) -> None:
    """By default (public endpoint, firewall Deny) the runtime account keeps its firewall with
    the sweeper's subnet and gets no private endpoint."""
    runtime = stack.one(ACCOUNT, "safetynet-sweeper-runtime").inputs
    assert runtime["publicNetworkAccess"] == "Enabled"
    assert firewall_subnets(runtime) == [SWEEPER_SUBNET_ID]
    assert stack.of_type(ENDPOINT) == []


def test_behind_the_closed_firewall_the_vault_admits_only_the_sweeper_and_allowed_ranges(
    run: RunFactory,
) -> None:
    """The key vault denies by default, letting in the sweeper's subnet (which resolves the
    database URL's Key Vault reference), the allowed public ranges and trusted services."""
    vault = run(FIREWALL).one("azure-native:keyvault:Vault").inputs["properties"]
    assert vault["networkAcls"] == {
        "defaultAction": "Deny",
        "bypass": "AzureServices",
        "ipRules": [{"value": OFFICE}, {"value": "198.51.100.7"}],
        "virtualNetworkRules": [{"id": SWEEPER_SUBNET_ID}],
    }


def test_an_open_data_account_leaves_the_vault_open(run: RunFactory) -> None:
    """networkDefaultAction Allow, an explicit choice, sets no vault network rules either."""
    vault = run(OPEN).one("azure-native:keyvault:Vault").inputs["properties"]
    assert "networkAcls" not in vault


PUBLIC_ACCESS_PATHS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    ACCOUNT: (("publicNetworkAccess",),),
    "azure-native:keyvault:Vault": (("properties", "publicNetworkAccess"),),
    APP: (("publicNetworkAccess",),),
    "azure-native:operationalinsights:Workspace": (
        ("publicNetworkAccessForIngestion",),
        ("publicNetworkAccessForQuery",),
    ),
}
"""Where each resource type carries its public network access (absent: Enabled)."""


def public_access(inputs: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> str:
    """The one value the paths hold, a left-out property read as ARM reads it (Enabled), in
    lower case: ARM compares enum values without regard to case."""
    values = set()
    for path in paths:
        node: Any = inputs
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        values.add(str(node or "Enabled").casefold())
    (value,) = values
    return value


def test_the_corp_table_says_what_public_access_each_resource_gets(run: RunFactory) -> None:
    """docs/deployment.md's Corp landing-zone table gives, per resource type, the public network
    access the program sets by default and with `publicNetworkAccess: Disabled`: the same as
    every registered resource of that type gets."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    match = re.search(
        r"<!-- corp-public-access:start -->\n(.*?)<!-- corp-public-access:end -->", text, re.S
    )
    assert match, "docs/deployment.md has no corp-public-access table"
    documented = {}
    for line in match.group(1).splitlines()[2:]:
        resource, access = line.split("|")[1:3]
        type_ = re.search(r"`([\w:-]+)`", resource)
        assert type_
        documented[type_.group(1)] = tuple(part.strip() for part in access.split(";"))
    assert set(documented) == set(PUBLIC_ACCESS_PATHS)
    runs = (run(), run(PRIVATE))
    for type_, paths in PUBLIC_ACCESS_PATHS.items():
        found = tuple(
            {public_access(res.inputs, paths) for res in stack.of_type(type_)} for stack in runs
        )
        assert found == tuple({value.casefold()} for value in documented[type_]), type_
