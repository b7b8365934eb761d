"""`make adoption`: the wheel as a platform team uses it, from a project of its own.

Builds the wheel (what `make dist` builds), checks what it holds (one top-level package, no test
doubles), installs it into a fresh venv in a temporary folder with the README's first `pip
install` line, run as written by that venv's pip (its dependencies held to uv.lock's versions
through PIP_CONSTRAINT), and checks from pip's own report and log that blob-safetynet came from
the wheel and no package index was asked for it;
writes a user project with its OWN `infra/__main__.py` (the README's program, as it stands) and
`policies/` package, and runs there, with nothing of this repository on sys.path: the protocol's
put and read against the embedded Azurite, and the user's Pulumi program instantiating
`SafetyNetStorage` with its sweeper app under mocks, every resource it registers passed through the
CrossGuard policies; then the pack from its own venv, over gRPC. Exit 0 when every check holds, 1
otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from blob_safetynet.policies.pack.crossguard import POLICIES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "blob_safetynet"
DOUBLES = (
    "arm_fake",
    "fault_proxy",
    "token_trap",
    "service_doubles",
    "pg_proxy",
    "kql",
    "telemetry",
    "etag_double",
    "scratch_db",
    "testkit",
    "tests/",
)
"""Names of the test doubles and test code: none may appear in the wheel."""
UV = ROOT / ".venv" / "bin" / "uv"
SUBNET = (
    "/subscriptions/00000000-0000-0000-0000-0000000000aa/resourceGroups/network-rg/providers/"
    "Microsoft.Network/virtualNetworks/apps-vnet/subnets/sweeper"
)

USER_POLICIES = '''"""The team's own policies package: the wheel must not shadow it."""

OWNER = "platform-team"
'''

USER_CHECK = '''"""Run in the user project: the protocol library from the installed wheel, a put and a read."""

import io
import sys
from pathlib import Path

import blob_safetynet
import policies
from azure.storage.blob import BlobServiceClient
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.store.documents import DocumentStore

here = Path(__file__).resolve().parent
assert policies.OWNER == "platform-team", policies.__file__
assert Path(blob_safetynet.__file__).is_relative_to(sys.prefix), blob_safetynet.__file__
assert not [p for p in sys.path if p and Path(p).resolve() == Path(REPO).resolve()], sys.path
with Azurite() as azurite:
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    container = service.create_container("documents")
    store = DocumentStore.from_url(f"sqlite:///{here / 'documents.db'}")
    store.init_schema()
    protocol = UploadProtocol(store, container)
    protocol.put("hello.txt", io.BytesIO(b"hello from the wheel"), ".txt", length=20)
    assert protocol.read("hello.txt") == b"hello from the wheel"
print("protocol: put and read against the embedded Azurite from the installed wheel")
'''


README = ROOT / "README.md"
README_SECTION = "## Use it in your own repository"


def readme_install() -> str:
    """The README's first install line: the first `pip install` of the first sh block of its
    "Use it in your own repository" section, which builds the wheel with `make dist` first."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(README_SECTION) :]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    if match is None:
        raise AdoptionError(f"README.md's {README_SECTION!r} section has no sh block")
    lines = [line.split("  #")[0].strip() for line in match.group(1).splitlines()]
    if "make dist" not in lines:
        raise AdoptionError("README.md's install block does not build the wheel with make dist")
    installs = [line for line in lines if line.startswith("pip install ")]
    if not installs:
        raise AdoptionError("README.md's install block has no pip install line")
    return installs[0]


def readme_program() -> str:
    """The first python block of the README's "Use it in your own repository" section, as it
    stands: the user project's infra/__main__.py."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(README_SECTION) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    if match is None:
        raise AdoptionError(f"README.md's {README_SECTION!r} section has no python block")
    return match.group(1)


USER_PROGRAM_CHECK = '''"""Run in the user project: its infra/__main__.py under Pulumi mocks, then the pack's policies."""

import runpy
import sys
from pathlib import Path

import pulumi
from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs
from pulumi_policy import ResourceValidationPolicy
from pulumi_policy.proxy import unknown_checking_proxy
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

import blob_safetynet
from blob_safetynet.policies.pack.crossguard import POLICIES

assert Path(blob_safetynet.__file__).is_relative_to(sys.prefix), blob_safetynet.__file__
registered = []


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        registered.append((args.typ, args.name, dict(args.inputs)))
        outputs = {"name": args.name, **args.inputs}
        # Answered as ARM answers: the outputs the component reads back.
        if args.typ == "azure-native:storage:StorageAccount":
            outputs["name"] = args.inputs["accountName"]
            outputs["primaryEndpoints"] = {"blob": f"https://{args.inputs['accountName']}.blob.core.windows.net/"}
        elif args.typ == "azure-native:managedidentity:UserAssignedIdentity":
            outputs.update(principalId=f"{args.name}-principal", clientId=f"{args.name}-client")
        elif args.typ == "azure-native:web:WebApp":
            identity = dict(args.inputs.get("identity") or {})
            identity["userAssignedIdentities"] = {k: {} for k in identity.get("userAssignedIdentities", [])}
            outputs["identity"] = identity
        elif args.typ == "azure-native:keyvault:Vault":
            outputs["properties"] = {**args.inputs["properties"], "vaultUri": "https://kv.vault.azure.net/"}
        elif args.typ == "azure-native:keyvault:Secret":
            outputs["properties"] = {"secretUri": "https://kv.vault.azure.net/secrets/db"}
        elif args.typ == "azure-native:applicationinsights:Component":
            outputs["connectionString"] = "InstrumentationKey=k;IngestionEndpoint=https://in.example/"
        return f"{args.name}-id", outputs

    def call(self, args):
        if args.token == "azure-native:network:getSubnet":  # read at preview: a fit subnet
            return {"serviceEndpoints": [{"service": "Microsoft.Storage"}, {"service": "Microsoft.KeyVault"}],
                    "delegations": [{"serviceName": "Microsoft.App/environments"}]}
        return {"subscriptionId": "00000000-0000-0000-0000-0000000000aa", "tenantId": "t", "objectId": "o", "clientId": "c"}


pulumi.runtime.set_mocks(Mocks(), project="team-docs", stack="dev", preview=False)
pulumi.runtime.set_all_config(
    {
        "team-docs:sweeperDatabaseUrl": "postgresql+psycopg://sweeper@db.example.test/docs",
        "team-docs:sweeperSubnetId": SUBNET,
    },
    ["team-docs:sweeperDatabaseUrl"],
)


async def program():
    runpy.run_path(str(Path("infra") / "__main__.py"), run_name="__main__")


_sync_await(run_pulumi_func(program))

types = {typ for typ, _, _ in registered}
(account,) = [i for t, n, i in registered if (t, n) == ("azure-native:storage:StorageAccount", "documents")]
assert account["allowSharedKeyAccess"] is False and account["tags"] == {"team": "platform"}, account
(service,) = [i for t, n, i in registered if n == "documents-blob-service"]
assert service["deleteRetentionPolicy"]["enabled"] is True, service
(policy,) = [i for t, n, i in registered if n == "documents-lifecycle"]
assert any(r["name"] == "delete-abandoned-uploads" for r in policy["policy"]["rules"]), policy
tag_write = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags/write"
assert any(
    tag_write in i["permissions"][0]["dataActions"]
    for t, _, i in registered if t == "azure-native:authorization:RoleDefinition"
)
(app,) = [i for t, _, i in registered if t == "azure-native:web:WebApp"]
assert app["virtualNetworkSubnetId"] == SUBNET, app
assert ("azure-native:authorization:RoleAssignment", "documents-access-sweeper-app") in {
    (t, n) for t, n, _ in registered
}
options = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
failing = {}
for rule in POLICIES:
    if not isinstance(rule, ResourceValidationPolicy):
        continue
    for typ, name, inputs in registered:
        args = ResourceValidationArgs(typ, unknown_checking_proxy(inputs), f"urn:{name}", name, options, None, None)
        rule.validate(args, lambda message, urn=None: failing.setdefault(rule.name, []).append(message))
# Advisory rules the component's defaults leave to the recommended configuration
# (docs/deployment.md#recommended-configuration): a private endpoint, a customer-managed key,
# a geo-redundant SKU.
gaps = {"SN-PUBLIC-NETWORK-ACCESS", "SN-PRIVATE-ENDPOINT", "SN-CMK-ENCRYPTION", "SN-GEO-REDUNDANCY"}
assert set(failing) <= gaps, failing
print(f"program: the README's, {len(registered)} resources registered by SafetyNetStorage "
      "with its sweeper app; "
      f"{sum(isinstance(p, ResourceValidationPolicy) for p in POLICIES)} resource policies, "
      f"failing only the documented gaps {sorted(failing)}")
'''


class AdoptionError(Exception):
    """A check of the adoption run failed; the message says which and why."""


def run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AdoptionError(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr}")
    return result.stdout


def build_wheel(out: Path) -> Path:
    run([str(UV), "build", "--wheel", "--quiet", "--out-dir", str(out), str(ROOT)], cwd=ROOT)
    wheels = sorted(out.glob("blob_safetynet-*.whl"))
    if len(wheels) != 1:
        raise AdoptionError(f"expected one wheel in {out}, found {wheels}")
    return wheels[0]


def check_wheel(wheel: Path) -> list[str]:
    """The wheel's one top-level package and no test doubles; returns its top-level names."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = sorted(
        {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    )
    if tops != [PACKAGE]:
        raise AdoptionError(f"the wheel claims top-level names {tops}, not only {PACKAGE}")
    leaked = [name for name in names if any(double in name for double in DOUBLES)]
    if leaked:
        raise AdoptionError(f"test doubles in the wheel: {leaked}")
    return tops


def make_venv(folder: Path, wheel: Path) -> Path:
    """A fresh venv, the wheel installed into it by the README's first install line, run in the
    folder holding `dist/` (where `make dist` leaves the wheel) by the venv's own pip, with
    uv.lock's versions as constraints. AdoptionError unless pip's report shows blob-safetynet
    taken from that wheel and its log shows no index asked for it (while the dependencies were)."""
    run([sys.executable, "-m", "venv", str(folder)], cwd=folder.parent)
    constraints = folder.parent / "lock-constraints.txt"
    run(
        [
            str(UV),
            "export",
            "--frozen",
            "--quiet",
            "--no-hashes",
            "--no-emit-project",
            "--extra",
            "infra",
            "--output-file",
            str(constraints),
        ],
        cwd=ROOT,
    )
    report = folder.parent / "pip-report.json"
    env = {
        **user_env(),
        "PATH": f"{folder / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PIP_CONSTRAINT": str(constraints),
        "PIP_REPORT": str(report),
        "PIP_VERBOSE": "2",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    log = run(
        ["bash", "-euo", "pipefail", "-c", readme_install()], cwd=wheel.parent.parent, env=env
    )
    check_no_index_lookup(json.loads(report.read_text()), log, wheel)
    return folder / "bin" / "python"


def check_no_index_lookup(report: dict[str, object], log: str, wheel: Path) -> None:
    """blob-safetynet installed from `wheel` as a direct reference, and no index page fetched
    for it; the dependencies' pages were (so the log is one that would show it)."""
    installed = report.get("install")
    ours = [
        item
        for item in (installed if isinstance(installed, list) else [])
        if item["metadata"]["name"] == "blob-safetynet"
    ]
    if len(ours) != 1:
        raise AdoptionError(f"pip's report installs {len(ours)} blob-safetynet, not 1")
    (item,) = ours
    if not item["is_direct"]:
        raise AdoptionError("pip resolved blob-safetynet by name, not from the wheel given")
    if item["download_info"]["url"] != wheel.resolve().as_uri():
        raise AdoptionError(f"blob-safetynet came from {item['download_info']['url']}, not {wheel}")
    pages = re.findall(r"Fetching project page and analyzing links: (\S+)", log)
    if not pages:
        raise AdoptionError("pip's log names no index page at all: the check would prove nothing")
    asked = [page for page in pages if "/blob-safetynet/" in page or "/blob_safetynet/" in page]
    if asked:
        raise AdoptionError(f"pip asked an index for blob-safetynet: {asked}")


def user_project(folder: Path) -> Path:
    (folder / "policies").mkdir(parents=True)
    (folder / "policies" / "__init__.py").write_text(USER_POLICIES)
    (folder / "infra").mkdir()
    (folder / "infra" / "__main__.py").write_text(readme_program())
    # Stands in for the release's sweeper-function.zip: under mocks only its hash is read.
    with zipfile.ZipFile(folder / "sweeper-function.zip", "w") as archive:
        archive.writestr("function_app.py", "# the release's zip holds the sweeper here\n")
    (folder / "check_protocol.py").write_text(f"REPO = {str(ROOT)!r}\n" + USER_CHECK)
    subnet = f"SUBNET = {SUBNET!r}\n"
    (folder / "check_program.py").write_text(f"REPO = {str(ROOT)!r}\n{subnet}" + USER_PROGRAM_CHECK)
    return folder


def pack_venv(project: Path, wheel: Path) -> Path:
    """The pack copied into the project with the wheel in its `wheels/` (as its requirements.txt
    says to put it), its venv made as the Pulumi CLI makes it: `python -m venv venv`, then
    `venv/bin/pip install -r requirements.txt`, nothing more on the command line."""
    pack = project / "safetynet-pack"
    pack.mkdir()
    for name in ("__main__.py", "PulumiPolicy.yaml", "requirements.txt"):
        shutil.copy2(ROOT / "policies" / name, pack / name)
    (pack / "wheels").mkdir()
    shutil.copy2(wheel, pack / "wheels" / wheel.name)
    run([sys.executable, "-m", "venv", "venv"], cwd=pack)
    pip = [str(pack / "venv" / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    run([*pip, "-r", "requirements.txt"], cwd=pack, env=user_env())
    return pack


def listed_policies(pack: Path) -> list[str]:
    """The policies the pack registers, asked over the analyzer's gRPC (GetAnalyzerInfo)."""
    from tests.policies.pulumi_cli import start_pack

    with start_pack(pack, python=pack / "venv" / "bin" / "python", env=user_env()) as running:
        return sorted(policy.name for policy in running.info().policies)


def user_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    azurite = ROOT / "node_modules" / ".bin" / "azurite-blob"
    env.setdefault("SAFETYNET_AZURITE_BIN", str(azurite))
    return env


def adopt(scratch: Path) -> list[str]:
    wheel = build_wheel(scratch / "dist")
    lines = [f"wheel: {wheel.name}, top-level {check_wheel(wheel)}, no test doubles"]
    python = make_venv(scratch / "venv", wheel)
    lines.append(f"install: {readme_install()!r} as written; no index asked for blob-safetynet")
    project = user_project(scratch / "project")
    for script in ("check_protocol.py", "check_program.py"):
        lines.append(run([str(python), script], cwd=project, env=user_env()).strip())
    policies = listed_policies(pack_venv(project, wheel))
    expected = sorted(policy.name for policy in POLICIES)
    if policies != expected:
        raise AdoptionError(f"the pack lists {policies}, not the library's {expected}")
    lines.append(f"pack: its own venv from requirements.txt, {len(policies)} policies over gRPC")
    return lines


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="safetynet-adoption-") as scratch:
        try:
            lines = adopt(Path(scratch))
        except AdoptionError as error:
            print(f"adoption: FAIL: {error}", file=sys.stderr)
            return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
