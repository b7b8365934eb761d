"""The subnets the stack is given, read at preview and checked for what the stack needs of them.

In a landing zone the network team makes the subnets; what they must carry is easy to miss and
is otherwise found only when ARM or the platform refuses a resource halfway through `up`:

- every subnet in an account's firewall rules needs the `Microsoft.Storage` service endpoint
  (`Microsoft.Storage.Global` serves as well): "Azure Storage firewall rules",
  https://learn.microsoft.com/azure/storage/common/storage-network-security;
- the subnet a Flex Consumption app joins must be delegated to `Microsoft.App/environments`
  ("Azure Functions networking options", Flex Consumption plan,
  https://learn.microsoft.com/azure/azure-functions/functions-networking-options), and, behind
  the closed firewall, it needs the `Microsoft.KeyVault` service endpoint too: the vault's
  virtual network rule names it ("Virtual network service endpoints for Azure Key Vault",
  https://learn.microsoft.com/azure/key-vault/general/overview-vnet-service-endpoints).

Each subnet is read with azure-native's `getSubnet` invoke before anything is declared, in the
subscription the provider deploys to; a subnet in another subscription (a hub's) cannot be read that way and is left to the
platform, with a note saying so. The third need, the `Microsoft.App` resource provider registered
in the subscription, has no azure-native invoke to read it (docs/deployment.md, Landing zone,
gives the command to check it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pulumi
from pulumi_azure_native import authorization, network

from blob_safetynet.infra.config import ConfigError, StackConfig

STORAGE_ENDPOINTS: Final = frozenset({"microsoft.storage", "microsoft.storage.global"})
KEY_VAULT_ENDPOINT: Final = "Microsoft.KeyVault"
APP_DELEGATION: Final = "Microsoft.App/environments"


@dataclass(frozen=True)
class SubnetNeeds:
    """A configured subnet, the key that names it and what the stack needs of it."""

    subnet_id: str
    key: str
    service_endpoint: bool
    delegation: bool
    key_vault_endpoint: bool = False

    @property
    def parts(self) -> tuple[str, str, str, str]:
        """(subscription, resource group, virtual network, subnet) of the id."""
        segments = self.subnet_id.strip("/").split("/")
        return segments[1], segments[3], segments[7], segments[9]


def subnet_needs(config: StackConfig, *, with_sweeper: bool) -> list[SubnetNeeds]:
    """Each configured subnet once, with everything the stack needs of it."""
    network_config = config.network
    sweeper = network_config.sweeper_subnet_id if with_sweeper else None
    needs: dict[str, SubnetNeeds] = {}
    for subnet, key in (
        *((s, "allowedSubnetIds") for s in network_config.allowed_subnet_ids),
        *(() if sweeper is None else ((sweeper, "sweeperSubnetId"),)),
    ):
        needs[subnet.lower()] = SubnetNeeds(
            subnet,
            key,
            service_endpoint=True,
            delegation=subnet == sweeper,
            key_vault_endpoint=network_config.closed and subnet == sweeper,
        )
    return list(needs.values())


def missing(needs: SubnetNeeds, subnet: Any) -> list[str]:
    """What `subnet` (a getSubnet result) lacks of `needs`, each said with how to add it."""
    endpoints = {str(e.service).lower() for e in subnet.service_endpoints or [] if e.service}
    delegations = {str(d.service_name).lower() for d in subnet.delegations or [] if d.service_name}
    gaps = []
    if needs.service_endpoint and not endpoints & STORAGE_ENDPOINTS:
        gaps.append(
            "the Microsoft.Storage service endpoint (the storage firewall's network rule needs "
            "it: az network vnet subnet update --service-endpoints Microsoft.Storage)"
        )
    if needs.key_vault_endpoint and KEY_VAULT_ENDPOINT.lower() not in endpoints:
        gaps.append(
            "the Microsoft.KeyVault service endpoint (the key vault's network rule needs it: "
            "az network vnet subnet update --service-endpoints Microsoft.KeyVault)"
        )
    if needs.delegation and APP_DELEGATION.lower() not in delegations:
        gaps.append(
            f"the delegation to {APP_DELEGATION} (Flex Consumption VNet integration needs it: "
            f"az network vnet subnet update --delegations {APP_DELEGATION})"
        )
    return gaps


def check(needs: SubnetNeeds, subnet: Any) -> None:
    """ConfigError naming the key, the subnet and what it lacks, if it lacks anything."""
    gaps = missing(needs, subnet)
    if gaps:
        raise ConfigError(needs.key, f"subnet {needs.subnet_id} lacks {' and '.join(gaps)}")


def check_subnets(needs: Sequence[SubnetNeeds], *, parent: pulumi.Resource) -> None:
    """Reads each subnet in the deploying subscription and raises ConfigError for the first
    that lacks what is needed. Called before any resource is declared (the engine creates
    resources as they are registered), so an unfit subnet stops `up` with nothing created. A
    subnet that cannot be read (another subscription, or no read right on it) is named in a
    note and left to the platform."""
    if not needs:
        return
    options = pulumi.InvokeOptions(parent=parent)
    deploying = authorization.get_client_config(opts=options).subscription_id
    for need in needs:
        subscription, group, vnet, name = need.parts
        if subscription.lower() != deploying.lower():
            pulumi.log.info(
                f"{need.key}: subnet {need.subnet_id} is in another subscription than the one "
                "deployed to and is not checked here; what it needs: docs/deployment.md, "
                "Landing zone",
                resource=parent,
            )
            continue
        try:
            subnet = network.get_subnet(
                resource_group_name=group,
                virtual_network_name=vnet,
                subnet_name=name,
                opts=options,
            )
        except Exception as error:
            pulumi.log.warn(
                f"{need.key}: subnet {need.subnet_id} could not be read to check it "
                f"({error}); not checked",
                resource=parent,
            )
            continue
        check(need, subnet)
