"""The data account's optional blob private endpoint, with the DNS that makes its name resolve.

Microsoft's "Azure Private Endpoint private DNS zone values"
(https://learn.microsoft.com/azure/private-link/private-endpoint-dns) names the zone of the blob
sub-resource `privatelink.blob.core.windows.net`: the account's public name keeps resolving
everywhere, and inside a linked virtual network it resolves through that zone to the endpoint's
private address. The zone group writes the endpoint's A record into the zone; each virtual
network whose clients must reach the account (the endpoint's and the sweeper's) gets a link.
"""

from __future__ import annotations

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
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
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
        zone = privatedns.PrivateZone(
            f"{name}-zone",
            private_zone_name=BLOB_ZONE,
            resource_group_name=resource_group_name,
            location="Global",
            opts=child,
        )
        for index, vnet in enumerate(_linked_networks(config, subnet_id)):
            privatedns.VirtualNetworkLink(
                f"{name}-link-{index}",
                private_zone_name=zone.name,
                resource_group_name=resource_group_name,
                location="Global",
                virtual_network=privatedns.SubResourceArgs(id=vnet),
                registration_enabled=False,
                opts=child,
            )
        network.PrivateDnsZoneGroup(
            f"{name}-zone-group",
            private_dns_zone_group_name="default",
            private_endpoint_name=self.endpoint.name,
            resource_group_name=resource_group_name,
            private_dns_zone_configs=[
                network.PrivateDnsZoneConfigArgs(name=BLOB_GROUP, private_dns_zone_id=zone.id)
            ],
            opts=child,
        )
        self.register_outputs({"endpointId": self.endpoint.id})


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
