"""Uploads the sweeper's code package with an Entra token, because shared keys are off.

`pulumi_azure_native.storage.Blob` authenticates with the account key (pulumi-azure-native
issues #2015 and #2948, open), which a key-less account refuses. This dynamic resource uploads
with `DefaultAzureCredential` instead: the identity running `pulumi up`, granted Storage Blob
Data Contributor on the deployment container by the program itself. Role assignments take
minutes to propagate, so a 403 is retried for a while before the update fails.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pulumi
from pulumi.dynamic import (
    CreateResult,
    DiffResult,
    ResourceProvider,
    UpdateResult,
)

from infra.config import ConfigError

PACKAGE_BLOB: Final = "released-package.zip"
"""The name Flex Consumption's blob-container deployment reads the package from."""

RBAC_PROPAGATION_SECONDS: Final = 600


@dataclass(frozen=True)
class PackageFile:
    path: Path
    sha256: str
    size: int


def read_package(path: Path) -> PackageFile:
    """Hashes the built zip; a missing file names the make target that builds it."""
    if not path.is_file():
        raise ConfigError(
            "sweeperPackagePath",
            f"{path} does not exist; build it with `make function-zip` before `pulumi up`",
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return PackageFile(path=path, sha256=digest, size=path.stat().st_size)


class _PackageUploader(ResourceProvider):
    """Runs in the engine's dynamic-provider host, never under test mocks."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        self._upload(props)
        return CreateResult(id_=f"{props['containerUrl']}/{props['blobName']}", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = ("containerUrl", "blobName", "sha256")
        changed = [key for key in keys if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self._upload(news)
        return UpdateResult(outs=news)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        # The container goes with the runtime account; deleting the package first would only
        # break a running app earlier.
        return None

    @staticmethod
    def _upload(props: dict[str, Any]) -> None:
        import time

        from azure.core.exceptions import HttpResponseError
        from azure.identity import DefaultAzureCredential
        from azure.storage.blob import ContainerClient

        data = Path(props["path"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != props["sha256"]:
            raise RuntimeError(f"{props['path']} changed during the update; run it again")
        container = ContainerClient.from_container_url(
            props["containerUrl"], credential=DefaultAzureCredential()
        )
        deadline = time.monotonic() + RBAC_PROPAGATION_SECONDS
        while True:
            try:
                container.upload_blob(props["blobName"], data, overwrite=True)
                return
            except HttpResponseError as error:
                if error.status_code != 403 or time.monotonic() > deadline:
                    raise
                time.sleep(15)


class FunctionPackage(pulumi.dynamic.Resource, module="safetynet", name="FunctionPackage"):
    """The zip at `released-package.zip` in the deployment container, replaced when it changes."""

    sha256: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        package: PackageFile,
        container_url: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            _PackageUploader(),
            name,
            {
                "containerUrl": container_url,
                "blobName": PACKAGE_BLOB,
                "path": str(package.path),
                "sha256": package.sha256,
                "size": package.size,
            },
            opts,
        )
