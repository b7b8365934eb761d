"""`SafetyNetStorage` as a team's own program uses it, under Pulumi mocks and the CrossGuard pack."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pulumi
import pytest

from blob_safetynet.infra.component import (
    COMPONENT_TYPE,
    Assignee,
    NetworkRules,
    SafetyNetStorage,
    SafetyNetStorageArgs,
    SweeperOptions,
)
from blob_safetynet.infra.config import ConfigError
from blob_safetynet.infra.lock import LOCK_NOTES, LOCK_TYPE
from blob_safetynet.infra.mocks import CLIENT_TOKEN, MOCK_ARM_TOKEN, run_under_mocks
from blob_safetynet.infra.preflight import LockPreflight
from blob_safetynet.infra.storage import PENDING_RULE
from testkit.arm_fake import FakeArm
from tests.infra.arm_permissions import CONTRIBUTOR, OWNER
from tests.infra.harness import RAW_DEFAULTS, SWEEPER_SUBNET_ID, StackRun, _run
from tests.policies.test_pack import INFRA_UNKNOWN, run_pack

UPLOADER = Assignee("11111111-2222-3333-4444-555555555555", "ServicePrincipal")
READER = Assignee("66666666-2222-3333-4444-555555555555", "Group")
ACCOUNT = "azure-native:storage:StorageAccount"
ASSIGNMENT = "azure-native:authorization:RoleAssignment"
TAG_WRITE = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags/write"


def user_program(args: SafetyNetStorageArgs) -> StackRun:
    """A one-component program, as a team writes it in its own infra/__main__.py."""

    def program() -> Mapping[str, pulumi.Output[str]]:
        storage = SafetyNetStorage("safetynet", args)
        return {
            "accountName": storage.account_name,
            "blobEndpoint": storage.blob_endpoint,
            **{
                f"{key}RoleDefinitionId": value
                for key, value in storage.role_definition_ids.items()
            },
        }

    return _run(program, None)


def defaults(**overrides: object) -> SafetyNetStorageArgs:
    fields: dict[str, object] = {
        "account_name": "snddocs01",
        "resource_group_name": "rg-docs",
        "location": "westeurope",
        "uploaders": [UPLOADER],
        "readers": [READER],
        **overrides,
    }
    return SafetyNetStorageArgs(**fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def plain() -> StackRun:
    return user_program(defaults())


def test_every_child_is_parented_to_the_component(plain: StackRun) -> None:
    """Nothing the component creates sits at the stack root: every resource has a parent below it."""
    top = [r for r in plain.resources if r.parent_type == "pulumi:pulumi:Stack"]
    assert [(r.type, r.name) for r in top] == [(COMPONENT_TYPE, "safetynet")]


def test_defaults_are_the_hardened_account(plain: StackRun) -> None:
    """With only the required args, the account is Entra-only, TLS 1.2, HTTPS, no public blobs,
    firewall Deny, and protected from replacement."""
    (account,) = plain.of_type(ACCOUNT)
    assert account.inputs["allowSharedKeyAccess"] is False
    assert account.inputs["minimumTlsVersion"] == "TLS1_2"
    assert account.inputs["enableHttpsTrafficOnly"] is True
    assert account.inputs["allowBlobPublicAccess"] is False
    assert account.inputs["networkRuleSet"]["defaultAction"] == "Deny"
    assert account.protect


def test_soft_delete_and_the_pending_lifecycle_rule_follow_the_args() -> None:
    """Soft-delete days and the pending blobs' lifecycle days reach the blob service and rule."""
    run = user_program(defaults(blob_soft_delete_days=21, pending_lifecycle_days=3))
    (service,) = run.of_type("azure-native:storage:BlobServiceProperties")
    assert service.inputs["deleteRetentionPolicy"]["days"] == 21
    (policy,) = run.of_type("azure-native:storage:ManagementPolicy")
    days = [
        rule["definition"]["actions"]["baseBlob"]["delete"]["daysAfterCreationGreaterThan"]
        for rule in policy.inputs["policy"]["rules"]
        if rule["name"] == PENDING_RULE
    ]
    assert days == [3]


def test_roles_carry_tag_write_and_name_the_principal_type(plain: StackRun) -> None:
    """The uploader's role writes tags; each assignment names its principal's type."""
    uploader = plain.one("azure-native:authorization:RoleDefinition", "safetynet-access-uploader")
    assert TAG_WRITE in uploader.inputs["permissions"][0]["dataActions"]
    types = {r.inputs["principalId"]: r.inputs["principalType"] for r in plain.of_type(ASSIGNMENT)}
    assert types == {UPLOADER.principal_id: "ServicePrincipal", READER.principal_id: "Group"}


def test_tags_reach_the_tracked_resources_only() -> None:
    """`tags` land on the account and the workspace, not on sub-resources such as the container."""
    run = user_program(defaults(tags={"costCenter": "42"}))
    (account,) = run.of_type(ACCOUNT)
    assert account.inputs["tags"] == {"costCenter": "42"}
    (container,) = run.of_type("azure-native:storage:BlobContainer")
    assert "tags" not in container.inputs


def sweeper(**overrides: object) -> SweeperOptions:
    fields: dict[str, object] = {
        "package_path": Path(str(RAW_DEFAULTS["sweeperPackagePath"])),
        "database_url": "postgresql://app@db.example/documents",
        "app_name": "func-docs",
        "runtime_account_name": "stdocsrt01",
        "key_vault_name": "kv-docs",
        "subnet_id": SWEEPER_SUBNET_ID,
        **overrides,
    }
    return SweeperOptions(**fields)  # type: ignore[arg-type]


def test_the_sweeper_app_is_optional_and_gets_the_sweeper_role(plain: StackRun) -> None:
    """With `sweeper`, the component builds the Function app and assigns it the sweeper role."""
    assert not plain.of_type("azure-native:web:WebApp")
    run = user_program(defaults(sweeper=sweeper()))
    assert run.of_type("azure-native:web:WebApp")
    names = {r.name for r in run.of_type(ASSIGNMENT)}
    assert "safetynet-access-sweeper-app" in names


def test_the_sweeper_options_reach_the_app_settings() -> None:
    """Table, renamed columns, lease, schedules and database auth are the app's settings."""
    options = sweeper(
        database_url="postgresql://app@db.example/documents",
        table="docs.files",
        columns={"id": "file_id"},
        lease=True,
        database_auth="entra",
        verify_schedule="0 0 */6 * * *",
    )
    run = user_program(defaults(sweeper=options))
    (settings,) = run.of_type("azure-native:web:WebAppApplicationSettings")
    got = settings.inputs["properties"]
    assert (got["SAFETYNET_TABLE"], got["SAFETYNET_COLUMNS"]) == ("docs.files", "id=file_id")
    assert (got["SAFETYNET_LEASE"], got["SAFETYNET_DB_AUTH"]) == ("true", "entra")
    assert got["SAFETYNET_VERIFY_SCHEDULE"] == "0 0 */6 * * *"


def test_a_missing_sweeper_zip_is_refused_before_anything_registers(tmp_path: Path) -> None:
    """The zip is read first: a missing one names the make target, and nothing was declared that
    the engine could already be creating."""
    refusals: list[str] = []

    def program() -> Mapping[str, pulumi.Output[str]]:
        try:
            SafetyNetStorage("docs", defaults(sweeper=sweeper(package_path=tmp_path / "no.zip")))
        except ConfigError as error:
            refusals.append(str(error))
        return {}

    run = _run(program, None)
    assert run.resources == []
    [refusal] = refusals
    assert "make function-zip" in refusal


def test_invalid_args_are_refused_at_construction() -> None:
    """A value the stack config refuses (soft delete of 0 days) fails before anything registers."""
    with pytest.raises(ConfigError, match="blobSoftDeleteDays"):
        SafetyNetStorage("bad", defaults(blob_soft_delete_days=0))


def test_the_pack_passes_every_resource_the_defaults_register(plain: StackRun) -> None:
    """The CrossGuard pack passes what the component registers with its defaults, but for the
    repository stack's own listed gaps (CMK, private endpoint, public network access)."""
    result = run_pack(plain, roles="safetynet-access")
    assert result.failing == set()
    assert set(result.unknown) <= INFRA_UNKNOWN


def test_the_docs_table_names_every_optional_argument() -> None:
    """docs/deployment.md's component table lists every optional field of SafetyNetStorageArgs
    and, in its `network` row, every field of NetworkRules: an argument added to the code and
    not to the page fails here."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    match = re.search(
        r"<!-- component-args:start -->\n(.*?)<!-- component-args:end -->", text, re.S
    )
    assert match, "docs/deployment.md has no component-args table"
    rows = [line.split("|")[1:-1] for line in match.group(1).splitlines()[2:]]
    named = {name for row in rows for name in re.findall(r"`(\w+)`", row[0])}
    required = {"account_name", "resource_group_name", "location"}
    assert named == {f.name for f in dataclasses.fields(SafetyNetStorageArgs)} - required
    (network,) = [row for row in rows if "`network`" in row[0]]
    listed = re.search(r"NetworkRules\(([^)]*)\)", network[2])
    assert listed
    assert [a.strip() for a in listed.group(1).split(",")] == [
        f.name for f in dataclasses.fields(NetworkRules)
    ]


def previewed(arm: FakeArm, **overrides: object) -> StackRun:
    """A one-component program run as `pulumi preview` runs it, its lock pre-flight reading the
    fake ARM with the token the mocks' getClientToken answers."""
    arm.token = MOCK_ARM_TOKEN
    args = defaults(
        lock_preflight=LockPreflight(endpoint=arm.endpoint, ca_file=arm.ca_file), **overrides
    )

    def program() -> Mapping[str, pulumi.Output[str]]:
        return {"accountName": SafetyNetStorage("safetynet", args).account_name}

    return run_under_mocks(program, project="blob-safetynet", stack="test", preview=True)


@pytest.fixture(scope="module")
def arm() -> Iterator[FakeArm]:
    with FakeArm() as fake:
        yield fake


def test_a_preview_by_a_contributor_fails_naming_the_role_to_ask_for(arm: FakeArm) -> None:
    """With the deployer's permissions on the group lacking locks/write (Contributor), the
    preview fails with the lock key, the action and the roles that grant it."""
    arm.group_permissions["rg-docs"] = [CONTRIBUTOR]
    with pytest.raises(
        Exception, match=re.escape("lock: CanNotDelete needs Microsoft.Authorization/locks/write")
    ) as caught:
        previewed(arm)
    assert "Owner or User Access Administrator" in str(caught.value)


def test_a_preview_by_an_owner_declares_the_lock(arm: FakeArm) -> None:
    """An Owner's permissions pass: the preview reads them once and declares the lock."""
    arm.group_permissions["rg-docs"] = [OWNER]
    before = arm.served.get("permissions", 0)
    run = previewed(arm)
    assert arm.served["permissions"] == before + 1
    assert run.one(LOCK_TYPE).inputs["level"] == "CanNotDelete"


def test_without_a_lock_the_preview_reads_no_permissions(arm: FakeArm) -> None:
    """lock=none declares no lock and asks ARM nothing, whatever the deployer may do."""
    arm.group_permissions["rg-docs"] = [CONTRIBUTOR]
    before = arm.served.get("permissions", 0)
    run = previewed(arm, lock="none")
    assert run.of_type(LOCK_TYPE) == []
    assert arm.served.get("permissions", 0) == before


def test_the_update_after_the_preview_reaches_no_arm(plain: StackRun) -> None:
    """Outside preview (the update, `safetynet config check`, these mocks) the lock is declared
    without asking for a token, so without a permission read."""
    assert plain.one(LOCK_TYPE).inputs["notes"] == LOCK_NOTES
    assert CLIENT_TOKEN not in plain.invokes


def test_the_preview_asks_for_the_deployers_token(arm: FakeArm) -> None:
    """In preview the pre-flight takes the token azure-native deploys with (getClientToken)."""
    arm.group_permissions["rg-docs"] = [OWNER]
    assert CLIENT_TOKEN in previewed(arm).invokes


def test_the_component_never_sets_immutability(plain: StackRun) -> None:
    """No account or container of the component carries immutable storage with versioning or
    an immutability policy: the protocol's replace and the sweeper's deletes need both mutable."""
    for res in plain.resources:
        assert "immutableStorageWithVersioning" not in res.inputs, res.name
        assert "ImmutabilityPolicy" not in res.type, res.name
