"""Stack configuration: defaults, one message per bad value, and the loader over pulumi.Config."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pulumi
import pytest

from blob_safetynet.infra.config import (
    ALLOWED,
    DATABASE_AUTH_KEY,
    DATABASE_URL_KEY,
    DEFAULTS,
    KEYS,
    NAMESPACE,
    STORAGE_SKUS,
    ConfigError,
    Principal,
    load,
    parse,
)
from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER
from tests.infra.harness import RAW_DEFAULTS, SWEEPER_SUBNET_ID, TEST_DATABASE_URL

GUID = "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"


def parse_with(**overrides: object) -> object:
    return parse({**RAW_DEFAULTS, **overrides})


def test_defaults_are_the_documented_safe_values() -> None:
    """With the database URL and the sweeper's subnet set, every key takes its safe default."""
    config = parse({DATABASE_URL_KEY: TEST_DATABASE_URL, "sweeperSubnetId": SWEEPER_SUBNET_ID})
    assert config.container_name == DEFAULT_CONTAINER
    assert config.blob_soft_delete_days == 14
    assert config.versioning is False
    assert config.sweeper_lease is False
    assert config.pending_expiry_days == 1
    assert config.uploader_principals == ()
    assert config.verifier_principals == ()
    assert config.infrastructure_encryption is True
    assert (config.network.default_action, config.network.public_network_access) == (
        "Deny",
        "Enabled",
    )
    assert config.retired_blob_days == 7
    assert config.sweeper_cutoff_seconds == 15 * 60
    assert config.sweeper_package_path == Path(str(DEFAULTS["sweeperPackagePath"]))


def test_every_key_has_an_allowed_range_in_words() -> None:
    """Each key (and only those) has a description of what it accepts, used by every message."""
    assert set(ALLOWED) == set(KEYS)


BAD_VALUES = [
    ("location", "West Europe"),
    ("storageSku", "Premium_LRS"),
    ("containerName", "Documents"),
    ("containerName", "ab"),
    ("containerName", "two--hyphens"),
    ("blobSoftDeleteDays", 0),
    ("blobSoftDeleteDays", 366),
    ("blobSoftDeleteDays", "fourteen"),
    ("blobSoftDeleteDays", True),
    ("containerSoftDeleteDays", 0),
    ("versioning", "yes"),
    ("sweeperLease", 1),
    ("versionExpiryDays", 0),
    ("pendingExpiryDays", 0),
    ("pendingExpiryDays", "1.5"),
    ("uploaderPrincipalIds", ["not-a-guid"]),
    ("uploaderPrincipalIds", [GUID, GUID.upper()]),
    ("readerPrincipalIds", "not json"),
    ("readerPrincipalIds", {"id": GUID}),
    ("verifierPrincipalIds", ["not-a-guid"]),
    ("verifierPrincipalIds", "not json"),
    ("retiredBlobDays", 1),
    ("retiredBlobDays", 366),
    ("retiredBlobDays", "seven"),
    ("sweeperSchedule", "*/5 * * * *"),
    ("sweeperSchedule", "0 */5 * * * * *"),
    ("sweeperCutoff", "15"),
    ("sweeperCutoff", "30s"),
    ("sweeperCutoff", "1d"),
    (DATABASE_URL_KEY, "sweeper@db"),
    (DATABASE_URL_KEY, ""),
    ("sweeperPackagePath", "   "),
    ("sweeperTable", "app files"),
    ("sweeperTable", "x" * 41),
    ("sweeperColumns", {"colour": "hue"}),
    ("sweeperColumns", {"id": "name"}),
    ("sweeperColumns", "id=file_id"),
    ("sweeperColumns", ["id"]),
    ("sweeperColumns", {"id": 3}),
    ("storageSku", "Premium_ZRS"),
    ("storageSku", "StandardV2_LRS"),
    ("storageSku", "standard_zrs"),
    ("lock", "ReadOnly"),
    ("lock", "readonly"),
    ("lock", "CannotDelete "),
    ("lock", ""),
    ("logRetentionDays", 29),
    ("logRetentionDays", 731),
    ("pointInTimeRestoreDays", -1),
    ("pointInTimeRestoreDays", 365),
    ("pointInTimeRestoreDays", "seven"),
    ("changeFeed", "maybe"),
]


@pytest.mark.parametrize(("key", "value"), BAD_VALUES)
def test_a_bad_value_stops_with_a_message_naming_the_key_and_range(key: str, value: object) -> None:
    """A bad value raises ConfigError naming `blob-safetynet:<key>` and its allowed range."""
    with pytest.raises(ConfigError) as caught:
        parse_with(**{key: value})
    assert caught.value.key == key
    message = str(caught.value)
    assert message.startswith(f"{NAMESPACE}:{key}: ")
    assert ALLOWED[key] in message


def test_a_missing_database_url_stops_the_program() -> None:
    """The database URL has no default: leaving it out names the key."""
    raw = {key: value for key, value in RAW_DEFAULTS.items() if key != DATABASE_URL_KEY}
    with pytest.raises(ConfigError, match=f"{DATABASE_URL_KEY}: is missing"):
        parse(raw)


def test_the_database_url_never_appears_in_a_message() -> None:
    """A malformed database URL is reported without echoing the secret."""
    secret = "sweeper:hunter2@db"
    with pytest.raises(ConfigError) as caught:
        parse_with(**{DATABASE_URL_KEY: secret})
    assert "hunter2" not in str(caught.value)


def test_an_unknown_key_is_refused_rather_than_ignored() -> None:
    """A misspelt key would leave a safety setting at its default, so it stops the program."""
    with pytest.raises(ConfigError, match="blobSoftDeletDays: unknown key"):
        parse_with(blobSoftDeletDays=30)


def test_values_are_not_clamped() -> None:
    """An in-range value is kept exactly; nothing is rounded towards a limit."""
    config = parse_with(blobSoftDeleteDays=365, pendingExpiryDays="7", sweeperCutoff="2h")
    assert (config.blob_soft_delete_days, config.pending_expiry_days) == (365, 7)
    assert config.sweeper_cutoff_seconds == 2 * 3600


def test_the_cutoff_must_be_shorter_than_the_lifecycle_backstop() -> None:
    """A cutoff of a day or more with a one-day backstop names both keys; two days accepts it."""
    with pytest.raises(ConfigError, match="pendingExpiryDays=1"):
        parse_with(sweeperCutoff="24h")
    assert parse_with(sweeperCutoff="1d", pendingExpiryDays=2).sweeper_cutoff == "1d"


def test_principal_ids_accept_the_json_list_pulumi_stores() -> None:
    """`pulumi config set --path` stores lists as JSON text; ids are normalized to lowercase."""
    stored = f'[{{"id": "{GUID.upper()}", "type": "Group"}}]'
    config = parse_with(uploaderPrincipalIds=stored, readerPrincipalIds="")
    assert config.uploader_principals == (Principal(GUID, "Group"),)
    assert config.reader_principals == ()


def test_a_relative_package_path_is_resolved_against_the_project_root(tmp_path: Path) -> None:
    """The default `build/...` path means the same file whatever directory Pulumi runs in."""
    raw = {**RAW_DEFAULTS, "sweeperPackagePath": "build/sweeper-function.zip"}
    assert parse(raw, root=tmp_path).sweeper_package_path == tmp_path / "build/sweeper-function.zip"


@pytest.fixture
def stack_config() -> Iterator[None]:
    """Leaves the process-wide Pulumi config empty again after a loader test."""
    yield
    pulumi.runtime.set_all_config({}, [])


def set_stack_config(values: Mapping[str, str], secret: bool = True) -> None:
    with_subnet = {"sweeperSubnetId": SWEEPER_SUBNET_ID, **values}
    full = {f"{NAMESPACE}:{key}": value for key, value in with_subnet.items()}
    secrets = [f"{NAMESPACE}:{DATABASE_URL_KEY}"] if secret else []
    pulumi.runtime.set_all_config(full, secrets)


@pytest.mark.usefixtures("stack_config")
def test_load_reads_the_stack_configuration() -> None:
    """Values set with `pulumi config set` reach the parsed config under their keys."""
    set_stack_config(
        {DATABASE_URL_KEY: TEST_DATABASE_URL, "blobSoftDeleteDays": "30", "versioning": "true"}
    )
    config = load()
    assert config.blob_soft_delete_days == 30
    assert config.versioning is True
    assert config.database_url == TEST_DATABASE_URL


@pytest.mark.usefixtures("stack_config")
def test_load_refuses_a_database_url_stored_in_plain_text() -> None:
    """The database URL must be set with --secret, or it would sit readable in the stack file."""
    set_stack_config({DATABASE_URL_KEY: TEST_DATABASE_URL}, secret=False)
    with pytest.raises(ConfigError, match="plain text"):
        load()


@pytest.mark.usefixtures("stack_config")
def test_load_refuses_alert_webhooks_stored_in_plain_text() -> None:
    """Webhook URLs often carry their token: set without --secret, they stop the program,
    and the message does not repeat them."""
    hooks = '["https://hooks.example.com/x?token=t0k"]'
    set_stack_config({DATABASE_URL_KEY: TEST_DATABASE_URL, "alertWebhooks": hooks})
    with pytest.raises(ConfigError, match="alertWebhooks: is stored in plain text") as caught:
        load()
    assert "t0k" not in str(caught.value)


@pytest.mark.usefixtures("stack_config")
def test_load_refuses_unknown_keys_in_the_project_namespace() -> None:
    """A typo in the stack file stops `pulumi up` instead of being ignored."""
    set_stack_config({DATABASE_URL_KEY: TEST_DATABASE_URL, "pendingExpiryDay": "3"})
    with pytest.raises(ConfigError, match="pendingExpiryDay: unknown key"):
        load()


def test_the_database_auth_is_password_or_entra_exactly() -> None:
    """sweeperDatabaseAuth defaults to password, accepts entra, refuses anything else by name."""
    assert parse(RAW_DEFAULTS).database_auth == "password"
    assert parse({**RAW_DEFAULTS, DATABASE_AUTH_KEY: "entra"}).database_auth == "entra"
    for value in ("Entra", "aad", "", True):
        with pytest.raises(ConfigError, match=DATABASE_AUTH_KEY):
            parse_with(**{DATABASE_AUTH_KEY: value})


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql+psycopg://sweeper:hunter2@db.example.test/documents", "carries a password"),
        ("postgresql://sweeper@db.example.test/documents?password=hunter2", "carries a password"),
        ("sqlite:///documents.db", "needs a PostgreSQL URL"),
    ],
)
def test_entra_refuses_a_url_it_cannot_use_without_echoing_it(url: str, problem: str) -> None:
    """With entra the URL is PostgreSQL without a password; the refusal never shows the URL."""
    with pytest.raises(ConfigError, match=problem) as caught:
        parse_with(**{DATABASE_AUTH_KEY: "entra", DATABASE_URL_KEY: url})
    assert "hunter2" not in str(caught.value)
    assert parse({**RAW_DEFAULTS, DATABASE_URL_KEY: url}).database_url == url


def test_a_bare_principal_id_is_refused_with_the_object_shape_to_use() -> None:
    """A plain GUID cannot say whether it is a user, a group or an app: the message shows the
    typed form instead of guessing one."""
    with pytest.raises(ConfigError, match=r'\{"id": "' + GUID + r'", "type": "ServicePrincipal"\}'):
        parse_with(uploaderPrincipalIds=[GUID])


@pytest.mark.parametrize(
    "item",
    [
        {"id": GUID},
        {"id": GUID, "type": "Device"},
        {"id": "nope", "type": "User"},
        {"id": GUID, "type": "User", "extra": 1},
    ],
)
def test_a_principal_needs_a_guid_and_one_of_the_three_types(item: dict[str, object]) -> None:
    """Only User, Group and ServicePrincipal, with a GUID id and nothing else, are accepted."""
    with pytest.raises(ConfigError, match="readerPrincipalIds"):
        parse_with(readerPrincipalIds=[item])


def test_the_same_principal_twice_in_one_list_is_refused() -> None:
    """One id, any case, gets one assignment per role."""
    twice = [{"id": GUID, "type": "User"}, {"id": GUID.upper(), "type": "Group"}]
    with pytest.raises(ConfigError, match="listed twice"):
        parse_with(uploaderPrincipalIds=twice)


def test_the_account_nets_default_to_the_recommended_values() -> None:
    """By default the data account is locked against deletion, logs are kept 30 days, and
    point-in-time restore and the change feed are off."""
    config = parse_with()
    assert config.lock == "CanNotDelete"
    assert config.locked
    assert config.log_retention_days == 30
    assert (config.point_in_time_restore_days, config.change_feed) == (0, False)
    assert config.storage_sku == DEFAULTS["storageSku"] == "Standard_ZRS"


def test_a_read_only_lock_is_refused_with_its_reason() -> None:
    """ReadOnly names what it would break: List Keys and the stack's own management writes."""
    with pytest.raises(ConfigError) as caught:
        parse_with(lock="ReadOnly")
    message = str(caught.value)
    assert caught.value.key == "lock"
    assert "List Keys" in message
    assert "lifecycle rule" in message


def test_lock_none_turns_the_lock_off() -> None:
    """none is the one way to deploy without the delete lock."""
    assert parse_with(lock="none").locked is False


@pytest.mark.parametrize("sku", STORAGE_SKUS)
def test_every_standard_storage_v2_sku_is_accepted(sku: str) -> None:
    """Each of the six SKUs a StorageV2 block blob account takes is accepted as it is."""
    assert parse_with(storageSku=sku).storage_sku == sku


def test_an_unknown_sku_is_refused_listing_the_accepted_ones() -> None:
    """The refusal lists all six SKUs, and a premium one says it makes a page blob account."""
    with pytest.raises(ConfigError) as caught:
        parse_with(storageSku="Standard_XYZ")
    assert all(sku in str(caught.value) for sku in STORAGE_SKUS)
    for premium in ("Premium_LRS", "Premium_ZRS"):
        with pytest.raises(ConfigError, match="makes a premium page blob account"):
            parse_with(storageSku=premium)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"versioning": False, "changeFeed": True}, "versioning"),
        ({"versioning": True, "changeFeed": False}, "changeFeed"),
        ({"versioning": True, "changeFeed": True, "blobSoftDeleteDays": 7}, "blobSoftDeleteDays"),
        ({"versioning": True, "changeFeed": True, "blobSoftDeleteDays": 6}, "blobSoftDeleteDays"),
    ],
    ids=["no-versioning", "no-change-feed", "equal-to-soft-delete", "above-soft-delete"],
)
def test_point_in_time_restore_without_what_arm_requires_is_refused(
    overrides: dict[str, object], named: str
) -> None:
    """Restore days above 0 need versioning, the change feed and fewer days than blob soft
    delete; a violation is a ConfigError on pointInTimeRestoreDays naming the missing key."""
    with pytest.raises(ConfigError) as caught:
        parse_with(pointInTimeRestoreDays=7, **overrides)
    assert caught.value.key == "pointInTimeRestoreDays"
    assert named in str(caught.value)


def test_point_in_time_restore_with_its_prerequisites_is_kept() -> None:
    """Restore days one below the soft-delete days, with versioning and the change feed, are
    kept exactly (strings as Pulumi stores them)."""
    config = parse_with(
        pointInTimeRestoreDays="13", versioning="true", changeFeed="true", blobSoftDeleteDays=14
    )
    assert (config.point_in_time_restore_days, config.change_feed) == (13, True)
