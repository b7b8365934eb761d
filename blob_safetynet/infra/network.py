"""The data account's optional blob private endpoint, with the DNS that makes its name resolve.

Microsoft's "Azure Private Endpoint private DNS zone values"
(https://learn.microsoft.com/azure/private-link/private-endpoint-dns) names the zone of the blob
sub-resource `privatelink.blob.core.windows.net`: the account's public name keeps resolving
everywhere, and inside a linked virtual network it resolves through that zone to the endpoint's
private address. The zone group writes the endpoint's A record into the zone; each virtual
network whose clients must reach the account (the endpoint's and the sweeper's) gets a link.

In a hub-and-spoke landing zone the zone is the hub's: a virtual network cannot be linked to two
zones of the same name, so a stack given `privateDnsZoneId` creates no zone and no links (the hub
links its networks) and registers the endpoint in the hub's zone by id ("Private Link and DNS
integration at scale", https://learn.microsoft.com/azure/cloud-adoption-framework/ready/azure-best-practices/private-link-and-dns-integration-at-scale).

Each link is named by its virtual network's id, not its place in a list, so a change in which
networks are linked leaves the others' links alone; the names links had by position are kept as
aliases, so a stack created with them updates in place.
"""

from __future__ import annotations

import hashlib
from typing import Final

import pulumi
from pulumi_azure_native import network, privatedns

from blob_safetynet.infra.config import StackConfig, virtual_network_id

BLOB_ZONE: Final = "privatelink.blob.core.windows.net"
BLOB_GROUP: Final = "blob"


class BlobPrivateEndpoint(pulumi.ComponentResource):
    """A private endpoint for the account's blob service, its private DNS zone and links."""

    endpoint: network.PrivateEndpoint

    def __init__(
        self,
        name: str,
        config: StackConfig,
        *,
        subnet_id: str,
        account_id: pulumi.Input[str],
        resource_group_name: pulumi.Input[str],
        zone_id: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`zone_id`: a zone another endpoint of the stack already registers in (the runtime
        account's endpoint shares the data account's), so no second zone of the name exists."""
        super().__init__("safetynet:network:BlobPrivateEndpoint", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.endpoint = network.PrivateEndpoint(
            f"{name}-endpoint",
            resource_group_name=resource_group_name,
            location=config.location,
            subnet=network.SubnetArgs(id=subnet_id),
            private_link_service_connections=[
                network.PrivateLinkServiceConnectionArgs(
                    name=f"{name}-blob",
                    private_link_service_id=account_id,
                    group_ids=[BLOB_GROUP],
                )
            ],
            opts=child,
        )
        self.zone_id: pulumi.Input[str] = (
            zone_id
            or config.network.private_dns_zone_id
            or self._own_zone(name, config, subnet_id, resource_group_name)
        )
        network.PrivateDnsZoneGroup(
            f"{name}-zone-group",
            private_dns_zone_group_name="default",
            private_endpoint_name=self.endpoint.name,
            resource_group_name=resource_group_name,
            private_dns_zone_configs=[
                network.PrivateDnsZoneConfigArgs(name=BLOB_GROUP, private_dns_zone_id=self.zone_id)
            ],
            opts=child,
        )
        self.register_outputs({"endpointId": self.endpoint.id})

    def _own_zone(
        self,
        name: str,
        config: StackConfig,
        subnet_id: str,
        resource_group_name: pulumi.Input[str],
    ) -> pulumi.Output[str]:
        """The stack's own zone in its resource group, linked to the networks that need it."""
        zone = privatedns.PrivateZone(
            f"{name}-zone",
            private_zone_name=BLOB_ZONE,
            resource_group_name=resource_group_name,
            location="Global",
            opts=pulumi.ResourceOptions(parent=self),
        )
        for index, vnet in enumerate(_linked_networks(config, subnet_id)):
            privatedns.VirtualNetworkLink(
                link_name(name, vnet),
                private_zone_name=zone.name,
                resource_group_name=resource_group_name,
                location="Global",
                virtual_network=privatedns.SubResourceArgs(id=vnet),
                registration_enabled=False,
                opts=pulumi.ResourceOptions(
                    parent=self, aliases=[pulumi.Alias(name=f"{name}-link-{index}")]
                ),
            )
        return zone.id


def link_name(name: str, vnet_id: str) -> str:
    """A link's logical name from its virtual network's id (ARM ids compare without case)."""
    vnet = vnet_id.rstrip("/").rsplit("/", 1)[-1].lower()
    digest = hashlib.sha256(vnet_id.lower().encode()).hexdigest()[:8]
    return f"{name}-link-{vnet}-{digest}"


def _linked_networks(config: StackConfig, subnet_id: str) -> list[str]:
    """The endpoint's virtual network and the sweeper's, each once (case-insensitively)."""
    subnets = [subnet_id]
    if config.network.sweeper_subnet_id is not None:
        subnets.append(config.network.sweeper_subnet_id)
    linked: dict[str, str] = {}
    for subnet in subnets:
        vnet = virtual_network_id(subnet)
        linked.setdefault(vnet.lower(), vnet)
    return list(linked.values())
