"""The Function's verification timer, run through the code the host runs, against Azurite."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import ModuleType

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.function import verify as verify_function
from blob_safetynet.policies.continuous.history import read_history
from blob_safetynet.policies.probes import PROBES
from blob_safetynet.settings import appsettings, signals
from blob_safetynet.settings.parsed import SettingsError
from testkit.arm_fake import TOKEN, FakeArm, compliant_account, set_path
from testkit.telemetry import RecordedTelemetry
from tests.sweeper.test_function_app import indexed_functions


@pytest.fixture
def recorded() -> Iterator[RecordedTelemetry]:
    recorder = RecordedTelemetry()
    yield recorder
    recorder.close()


def verify_settings(azurite: Azurite, container: ContainerClient) -> dict[str, str]:
    return {
        appsettings.CONNECTION_STRING.name: azurite.connection_string,
        appsettings.CONTAINER.name: container.container_name,
        appsettings.VERIFY_SCHEDULE.name: "0 30 3 * * *",
    }


def test_the_host_indexes_a_verification_timer_on_its_own_schedule_setting(
    function_app: ModuleType,
) -> None:
    """Beside the sweep timer the app has a verification timer whose schedule the host
    resolves from SAFETYNET_VERIFY_SCHEDULE."""
    functions = indexed_functions(function_app)
    timer = functions[function_app.VERIFY_FUNCTION_NAME]

    [binding] = timer.get_bindings()
    assert binding.schedule == f"%{appsettings.VERIFY_SCHEDULE.name}%"
    assert set(functions) == {function_app.FUNCTION_NAME, function_app.VERIFY_FUNCTION_NAME}


def test_a_timer_run_writes_its_history_and_its_telemetry(
    function_app: ModuleType,
    azurite: Azurite,
    container: ContainerClient,
    recorded: RecordedTelemetry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The timer's run acts on Azurite, leaves one history record and sends one custom event
    per probe with the same run id, plus the run event and its trace."""
    caplog.set_level(logging.INFO, logger="safetynet")

    record = function_app.verify_once(
        verify_settings(azurite, container), telemetry=recorded.telemetry
    )

    [stored] = read_history(container).records
    assert stored["run_id"] == record["run_id"]
    events = recorded.events(signals.CHECK_EVENT)
    assert [e[signals.CHECK_ID] for e in events] == [probe.id for probe in PROBES]
    assert {e[signals.RUN_ID] for e in events} == {record["run_id"]}
    assert len(recorded.events(signals.RUN_EVENT)) == 1
    [trace] = [r for r in caplog.records if verify_function.VERIFY_FINISHED_EVENT in r.getMessage()]
    assert json.loads(trace.getMessage())["history_blob"] == record["history_blob"]


def test_timer_runs_on_later_days_turn_an_uncollected_canary_into_a_failure(
    function_app: ModuleType,
    azurite: Azurite,
    container: ContainerClient,
    recorded: RecordedTelemetry,
) -> None:
    """Daily runs with a clock moved on: the canary planted by the first run is overdue ten
    days later on Azurite, which has no lifecycle management, and the history shows the turn."""
    env = {**verify_settings(azurite, container), appsettings.PENDING_DAYS.name: "7"}
    start = datetime.now(UTC)
    for day in (0, 10):
        moment = start + timedelta(days=day)
        function_app.verify_once(env, telemetry=recorded.telemetry, now=lambda m=moment: m)

    outcomes = [
        next(c["outcome"] for c in r["checks"] if c["id"] == "SNV-PENDING-LIFECYCLE")
        for r in read_history(container).records
    ]
    assert outcomes == ["NOT_VERIFIABLE", "FAIL"]
    assert recorded.gauge(signals.CANARY_OVERDUE_METRIC) == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {appsettings.PENDING_DAYS.name: "seven"},
            "SAFETYNET_PENDING_DAYS: 'seven' is not a whole number of days from 1 to 365",
        ),
        (
            {appsettings.PENDING_DAYS.name: "0"},
            "SAFETYNET_PENDING_DAYS: '0' is not a whole number",
        ),
        (
            {appsettings.VERIFY_ACCOUNT_ID.name: "/subscriptions/\x1b[2Jx"},
            "SAFETYNET_VERIFY_ACCOUNT_ID: '/subscriptions/\\x1b[2Jx' is not a storage account",
        ),
        (
            {appsettings.SWEEPER_PERIOD.name: "5 minutes"},
            "SAFETYNET_SWEEPER_PERIOD: '5 minutes' is not a duration",
        ),
    ],
    ids=["days-not-a-number", "days-zero", "account-id-malformed", "period-malformed"],
)
def test_a_malformed_verification_setting_fails_the_run_naming_it(
    function_app: ModuleType,
    azurite: Azurite,
    container: ContainerClient,
    extra: dict[str, str],
    message: str,
) -> None:
    """A malformed setting stops the run before it acts, with the setting's name, the value
    escaped, and what is allowed; nothing is written."""
    with pytest.raises(SettingsError, match=re.escape(message)):
        function_app.verify_once({**verify_settings(azurite, container), **extra})

    assert list(container.list_blobs()) == []


def test_on_azure_the_run_refuses_to_start_without_the_verifier_identity(
    function_app: ModuleType,
) -> None:
    """With an account URL the run needs the verifier identity's client id: the app's own
    identity holds the sweeper role, which may not write probe blobs."""
    env = {appsettings.ACCOUNT_URL.name: "https://acct.blob.core.windows.net"}

    with pytest.raises(SettingsError, match=r"missing app setting.*SAFETYNET_VERIFIER_CLIENT_ID"):
        function_app.verify_once(env)


def test_a_refused_target_never_shows_the_secret_it_came_with(
    function_app: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """A connection string pointing off loopback is refused before anything is sent, and
    neither the error nor any log record carries its account key."""
    key = "c2VjcmV0LWtleS1mb3ItdGhlLXRlc3Q="
    env = {
        appsettings.CONNECTION_STRING.name: "DefaultEndpointsProtocol=https;AccountName=a;"
        f"AccountKey={key};BlobEndpoint=https://blob.example.com/",
    }

    with pytest.raises(SettingsError) as caught:
        function_app.verify_once(env)

    assert key not in str(caught.value)
    assert all(key not in record.getMessage() for record in caplog.records)


def test_the_audited_account_is_read_from_its_resource_id(function_app: ModuleType) -> None:
    """SAFETYNET_VERIFY_ACCOUNT_ID gives the audit its subscription, group and account."""
    subscription = "00000000-0000-0000-0000-0000000000aa"
    account_id = (
        f"/subscriptions/{subscription}/resourceGroups/rg-x/providers/"
        "Microsoft.Storage/storageAccounts/acct1"
    )
    env = {
        appsettings.ACCOUNT_URL.name: "https://acct1.blob.core.windows.net",
        appsettings.VERIFIER_CLIENT_ID.name: "11111111-1111-1111-1111-111111111111",
        appsettings.VERIFY_ACCOUNT_ID.name: account_id,
    }

    settings = verify_function.VerifySettings.from_environment(env)

    assert settings.account_id == (subscription, "rg-x", "acct1")
    assert settings.pending_days == int(str(appsettings.PENDING_DAYS.default))


def test_the_timer_judges_the_settings_rules_beside_the_probes(
    function_app: ModuleType,
    azurite: Azurite,
    container: ContainerClient,
    recorded: RecordedTelemetry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With SAFETYNET_VERIFY_ACCOUNT_ID the run reads the account through Resource Manager (a
    local HTTPS stand-in here) and reports every settings rule as its own event; a setting
    someone switched off (blob soft delete) is a rule FAIL in the history and the telemetry."""
    with FakeArm() as arm:
        account = arm.add(compliant_account("acct1", "rg-x"))
        set_path(account.blob_service_properties, "properties.deleteRetentionPolicy.enabled", False)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", arm.ca_file)
        env = {
            **verify_settings(azurite, container),
            appsettings.VERIFY_ACCOUNT_ID.name: str(account.body["id"]),
            appsettings.ARM_ENDPOINT.name: arm.endpoint,
            appsettings.ARM_TOKEN.name: TOKEN,
        }
        record = function_app.verify_once(env, telemetry=recorded.telemetry)

    assert record["settings_errors"] == []
    rules = {
        e[signals.CHECK_ID]: e[signals.OUTCOME]
        for e in recorded.events(signals.CHECK_EVENT)
        if e[signals.CHECK_KIND] == signals.KIND_RULE
    }
    assert rules["SN-BLOB-SOFT-DELETE"] == "FAIL"
    assert {c["id"] for c in record["checks"] if c["kind"] == signals.KIND_RULE} == set(rules)


def test_the_resource_manager_setting_takes_only_a_loopback_stand_in(
    function_app: ModuleType, azurite: Azurite, container: ContainerClient
) -> None:
    """The verifier's token goes to Resource Manager itself: an ARM endpoint setting naming
    any other host is refused by name before anything is sent."""
    env = {
        **verify_settings(azurite, container),
        appsettings.ARM_ENDPOINT.name: "https://arm.example.com",
    }

    with pytest.raises(
        SettingsError, match=re.escape("SAFETYNET_ARM_ENDPOINT: 'https://arm.example.com'")
    ):
        function_app.verify_once(env)


def test_the_timers_audit_reads_nothing_outside_the_verifier_identitys_roles(
    function_app: ModuleType,
    azurite: Azurite,
    container: ContainerClient,
    recorded: RecordedTelemetry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The verifier identity is a Reader on the stack's resource group only
    (blob_safetynet/infra/sweeper_app.py; tests/infra/test_sweeper_app.py checks the grant). With
    Resource Manager refusing every read outside that group, the settings audit makes no
    refused read, the run is complete (no settings error, so `verification-silent` stays
    quiet), and only the Defender rule, whose plan is a subscription-scope read, is UNKNOWN
    with that reason."""
    with FakeArm() as arm:
        account = arm.add(compliant_account("acct1", "rg-x"))
        account.defender = None  # no setting of its own: the subscription's plan decides
        arm.granted_scopes = (f"/subscriptions/{account.id.split('/')[2]}/resourceGroups/rg-x",)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", arm.ca_file)
        env = {
            **verify_settings(azurite, container),
            appsettings.VERIFY_ACCOUNT_ID.name: account.id,
            appsettings.ARM_ENDPOINT.name: arm.endpoint,
            appsettings.ARM_TOKEN.name: TOKEN,
        }
        record = function_app.verify_once(env, telemetry=recorded.telemetry)
        refused = list(arm.refused)

    assert refused == []
    assert record["settings_errors"] == []
    [run] = recorded.events(signals.RUN_EVENT)
    assert int(run[signals.INCOMPLETE]) == 0
    rules = {c["id"]: c for c in record["checks"] if c["kind"] == signals.KIND_RULE}
    unknown = {key for key, check in rules.items() if check["outcome"] == "UNKNOWN"}
    assert unknown == {"SN-DEFENDER-FOR-STORAGE"}
    assert "subscription-scope read outside this identity's roles" in str(
        rules["SN-DEFENDER-FOR-STORAGE"]["detail"]
    )


def test_the_fake_resource_manager_refuses_reads_outside_the_granted_scopes() -> None:
    """The scope check the test above relies on: a read above the granted resource group (the
    subscription's Defender plan) answers 403 and is listed as refused."""
    from blob_safetynet.policies.sources.connection import StaticTokenCredential
    from blob_safetynet.policies.sources.live import run_audit
    from blob_safetynet.policies.sources.results import Scope

    with FakeArm() as arm:
        account = arm.add(compliant_account("acct1", "rg-x"))
        account.defender = None
        arm.granted_scopes = (f"/subscriptions/{account.id.split('/')[2]}/resourceGroups/rg-x",)
        report = run_audit(
            Scope(account.id.split("/")[2], "rg-x", "acct1"),
            StaticTokenCredential(TOKEN),
            arm_endpoint=arm.endpoint,
            connection_verify=arm.ca_file,
            concurrency=1,
        )
        refused = list(arm.refused)

    assert [path.rsplit("/", 2)[-2:] for path in refused] == [["pricings", "StorageAccounts"]]
    assert [(e.operation, e.kind.value) for e in report.all_errors] == [
        ("pricings/get", "permission")
    ]
