"""Hostile input fuzzed: every command's options and environment variables, and the Function.

Whatever hypothesis feeds in (durations, URLs, names, counts, paths, tokens, with control
characters, non-ASCII digits and planted secrets), a run ends with an exit code of the contract
other than INTERNAL, no traceback, no raw control character in its output, JSON when asked for,
and none of the planted secrets shown. Hosts are loopback or invalid, so nothing leaves the
machine. Example counts are kept small (`make test` time); `SAFETYNET_FUZZ_EXAMPLES=500` digs
deeper.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from unittest import mock

import pytest
from azure.storage.blob import BlobServiceClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.store.documents import DocumentStore
from testkit.arm_fake import SUBSCRIPTION, TOKEN, FakeArm, compliant_account

pytestmark = pytest.mark.e2e  # every command fuzzed

PASSWORD = "Plant3dPassw0rd"
SIGNATURE = "Plant3dSignature"
ACCOUNT_KEY = "UGxhbnQzZEFjY291bnRLZXk="
PLANTED = (PASSWORD, SIGNATURE, ACCOUNT_KEY, TOKEN)
CONTRACT = {ExitCode.OK, ExitCode.FINDINGS, ExitCode.USAGE, ExitCode.INCOMPLETE}
CONTRACT_MID_RUN = CONTRACT | {ExitCode.SERVICE_FAILED}

FUZZ = settings(
    # Per test, not a global profile: other modules' property tests keep their own settings.
    max_examples=int(os.environ.get("SAFETYNET_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Text a shell can pass: anything but NUL, lone surrogates only as surrogateescape makes them.
argv_text = st.text(
    st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=30
) | st.text(st.sampled_from("\udc80\udcff\u202e\x1b\n\r\t9\u0665-=;@/?&"), max_size=8)
env_text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=30)
numbers = st.sampled_from(
    ["0", "-1", "1", "4", "64", "65", "1_0", " 4 ", "\u0664", "٣", "1e3", "9" * 30, "0x10", ""]
)
durations = st.sampled_from(
    ["15m", "1s", "0s", "365d", "366d", "9" * 23 + "d", "\u0661\u0665m", "15 m", "m", "-5m", "1w"]
)
names = st.sampled_from(
    ["documents", "ab", "a" * 64, "Docs", "a--b", "-ab", "ab-", "$root", "a/b", "x\ny", "..", ""]
)
# No loopback https URL here: with a usable database it would make DefaultAzureCredential try
# every login it knows, which reaches the network. For the same reason the fuzz never turns the
# custom-endpoint opt-in on (hosts are `.invalid`, RFC 6761, in case it ever does); the rule's
# acceptance and its opt-in are tested by themselves.
urls = st.sampled_from(
    [
        f"https://acct.blob.core.windows.net/?sv=1&sig={SIGNATURE}",
        f"https://u:{PASSWORD}@127.0.0.1:1/x",
        "https://evil.invalid",
        "https://acct.blob.core.windows.net.evil.invalid",
        "http://127.0.0.1:1/devstoreaccount1",
        "https://[::1",
        "https://[zz]/x",
        "ftp://127.0.0.1/x",
        "https://",
        "https://acct.blob.core.windows.net#frag",
    ]
)
connection_strings = st.sampled_from(
    [
        f"DefaultEndpointsProtocol=https;AccountName=prod;AccountKey={ACCOUNT_KEY};"
        "EndpointSuffix=core.windows.net",
        f"AccountName=x;AccountKey={ACCOUNT_KEY}",
        f"BlobEndpoint=https://evil.invalid;SharedAccessSignature=sv=1&sig={SIGNATURE}",
        "not a connection string",
        ";;;=",
    ]
)


def db_urls(workdir: Path) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            f"postgresql+psycopg://u:{PASSWORD}@127.0.0.1:1/db",
            f"postgresql+psycopg://u@127.0.0.1:1/db?password={PASSWORD}",
            f"postgresql+psycopg://u:{PASSWORD}@x@127.0.0.1:1/db",
            "postgresql+psycopg://127.0.0.1:1",
            f"postgresql+pg8000://u:{PASSWORD}@127.0.0.1:1/db",
            "sqlite://",
            "sqlite:///:memory:",
            f"sqlite:///{workdir}/missing/nested.db",
            f"sqlite:///{workdir}/fresh.db",
            "mongodb://127.0.0.1:1/x",
            "sqlite+pysqlcipher:///x.db",
            "://",
        ]
    )


def paths(workdir: Path) -> st.SearchStrategy[str]:
    """Output paths confined to `workdir`: empty, directories, under a file, odd names."""
    safe_name = st.text(
        st.characters(exclude_characters="\x00/", exclude_categories=["Cs"]),
        min_size=1,
        max_size=12,
    ).filter(lambda n: n not in (".", ".."))
    return st.sampled_from(["", ".", str(workdir), f"{workdir}/", f"{workdir}/afile/x"]) | (
        safe_name.map(lambda n: str(workdir / "out" / n))
    )


BUG_TYPES = (
    TypeError,
    AttributeError,
    KeyError,
    IndexError,
    AssertionError,
    NameError,
    OverflowError,
    UnicodeError,
)
"""Exceptions that mean a bug in safetynet, not a refused setting or a failing service."""


def _chain(error: BaseException | None) -> Iterator[str]:
    """The messages the Functions host would print: the error and everything chained to it."""
    while error is not None:
        yield f"{type(error).__name__}: {error}"
        error = error.__cause__ or error.__context__


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")}
    with mock.patch.dict(os.environ, {**clean, **values}, clear=True):
        yield


def run(argv: list[str], env: Mapping[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # only --help does this
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def assert_contract(
    code: int, out: str, err: str, wants_json: bool, allowed: set[ExitCode] = CONTRACT
) -> None:
    assert code in allowed, err
    assert "Traceback" not in err
    raw = {c for c in out + err if unicodedata.category(c).startswith("C") and c != "\n"}
    assert raw == set(), f"unescaped control characters {raw!r} in {out + err!r}"
    for secret in PLANTED:
        assert secret not in out + err
    if wants_json:
        try:
            document = json.loads(out)  # a report: one (indented) JSON document
        except json.JSONDecodeError:
            document = json.loads(out.strip().splitlines()[-1])  # an error after other output
        assert isinstance(document, dict)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch directory that is also the working directory (relative paths land here)."""
    path = tmp_path_factory.mktemp("fuzz")
    (path / "afile").write_text("x")
    (path / "out").mkdir()
    before = Path.cwd()
    os.chdir(path)
    yield path
    os.chdir(before)


@pytest.fixture(scope="module")
def valid_db(workdir: Path) -> str:
    url = f"sqlite:///{workdir / 'documents.db'}"
    DocumentStore.from_url(url).init_schema()
    return url


@pytest.fixture(scope="module")
def existing_container(service_client: BlobServiceClient) -> Iterator[str]:
    container = service_client.create_container("fuzz-target")
    yield "fuzz-target"
    container.delete_container()


@pytest.fixture(scope="module")
def arm() -> Iterator[FakeArm]:
    with FakeArm() as server:
        server.add(compliant_account("good", "rg-docs"))
        yield server


OVERRIDES = st.fixed_dictionaries(
    {},
    optional={
        "--cutoff": durations | argv_text,
        "--concurrency": numbers | argv_text,
        "--container": names | argv_text,
        "--connection-string": connection_strings | argv_text,
        "--dry-run": st.just(""),
        "--json": st.just(""),
    },
)
ENV = st.fixed_dictionaries(
    {},
    optional={
        "SAFETYNET_CUTOFF": durations | env_text,
        "SAFETYNET_CONCURRENCY": numbers,
        "SAFETYNET_LEASE": st.sampled_from(["true", "false", "yes", "", "TRUE "]) | env_text,
        "SAFETYNET_CONTAINER": names,
        "SAFETYNET_ALLOW_CUSTOM_ENDPOINT": st.sampled_from(["false", "nope"]),
        "SAFETYNET_ACCOUNT_URL": urls,
    },
)


FLAGS = ("--dry-run", "--json", "--repair")


def argv_of(command: list[str], options: Mapping[str, str]) -> list[str]:
    """`--option=value` words, so a value starting with '-' is never read as an option."""
    return [*command, *(o if o in FLAGS else f"{o}={v}" for o, v in options.items())]


def test_sweep_and_reconcile_options_and_environment(
    workdir: Path, valid_db: str, azurite: Azurite, existing_container: str
) -> None:
    """sweep and reconcile: any options and variables end in a contract code, cleanly."""

    seen: set[int] = set()

    @FUZZ
    @given(
        command=st.sampled_from(["sweep", "reconcile"]),
        overrides=OVERRIDES,
        env=ENV,
        plan=st.fixed_dictionaries(
            {},
            optional={
                "--write-plan": paths(workdir),
                "--apply-plan": paths(workdir) | st.just(str(workdir / "afile")),
                "--max-delete": numbers,
                "--max-share": st.sampled_from(["0.5", "0", "nan", "inf", "1e999", "-1", "x"]),
                "--repair": st.just(""),
            },
        ),
    )
    @example(command="sweep", overrides={"--json": ""}, env={}, plan={})
    @example(command="reconcile", overrides={}, env={"SAFETYNET_CUTOFF": "1s"}, plan={})
    def check(
        command: str, overrides: dict[str, str], env: dict[str, str], plan: dict[str, str]
    ) -> None:
        options = {
            "--db": valid_db,
            "--connection-string": azurite.connection_string,
            "--container": existing_container,
            **overrides,
        }
        if command == "reconcile":
            options = {k: v for k, v in options.items() if k not in ("--concurrency", "--dry-run")}
            options.update(plan)
            if "--cutoff" in options:
                options["--older-than"] = options.pop("--cutoff")
        if "SAFETYNET_ACCOUNT_URL" in env:
            # Without a connection string the account URL is the target: a missing database
            # then stops the run after the endpoint rule and before any connection.
            options.pop("--connection-string", None)
            options["--db"] = f"sqlite:///{workdir / 'missing.db'}"
        code, out, err = run(argv_of([command], options), env)
        assert_contract(code, out, err, "--json" in options, CONTRACT_MID_RUN)
        seen.add(code)

    check()
    assert ExitCode.OK in seen  # the fuzz reached a real run, not only the option checks


def test_database_and_account_urls(
    workdir: Path, azurite: Azurite, existing_container: str
) -> None:
    """--db, --account-url and their variables: refused or used, never shown with a secret."""

    @FUZZ
    @given(
        command=st.sampled_from(["sweep", "reconcile", "db init"]),
        db=db_urls(workdir) | argv_text,
        account_url=urls | argv_text,
        via_env=st.booleans(),
        as_json=st.booleans(),
    )
    @example(
        command="db init",
        db=f"sqlite:///{workdir}/fresh.db",
        account_url="",
        via_env=False,
        as_json=True,
    )
    def check(command: str, db: str, account_url: str, via_env: bool, as_json: bool) -> None:
        env = {"SAFETYNET_DB_URL": db} if via_env else {}
        options = {} if via_env else {"--db": db}
        if command != "db init":
            options["--account-url"] = account_url
        if as_json:
            options["--json"] = ""
        code, out, err = run(argv_of(command.split(), options), env)
        assert_contract(code, out, err, as_json)
        assert not (workdir / "missing").exists()
        seen.add(code)

    seen: set[int] = set()
    check()
    assert ExitCode.OK in seen


def test_audit_options_and_environment(workdir: Path, arm: FakeArm) -> None:
    """audit: names, endpoints, counts, paths and tokens end in a contract code, cleanly."""

    @FUZZ
    @given(
        options=st.fixed_dictionaries(
            {},
            optional={
                "--subscription": st.sampled_from([SUBSCRIPTION, "x", ""]) | argv_text,
                "--resource-group": st.sampled_from(["rg-docs", "rg-empty", "a" * 91, "rg."])
                | argv_text,
                "--account": st.sampled_from(["good", "Bad", "/subscriptions/x"]) | argv_text,
                "--arm-endpoint": urls | argv_text,
                "--concurrency": numbers,
                "--min-blob-soft-delete-days": numbers,
                "--min-container-soft-delete-days": numbers,
                "--max-pending-days": numbers,
                "--container": names,
                "--format": st.sampled_from(["json", "table", "sarif", "junit", "xlsx"]),
                "--fail-on": st.sampled_from(["none", "low", "critical", "bogus"]),
                "--output": paths(workdir),
            },
        ),
        token=st.sampled_from([TOKEN, TOKEN + "\r\n", " ", f"{TOKEN}\x1b", "wrong"]) | env_text,
        variables=st.fixed_dictionaries(
            {},
            optional={
                "AZURE_SUBSCRIPTION_ID": st.sampled_from(["", "x", SUBSCRIPTION.upper()])
                | env_text,
                "SAFETYNET_ARM_ENDPOINT": urls | env_text,
                "SAFETYNET_CONTAINER": names | env_text,
                "SAFETYNET_ALLOW_CUSTOM_ENDPOINT": st.sampled_from(["false", "no"]),
            },
        ),
    )
    @example(options={"--format": "json"}, token=TOKEN + "\r\n", variables={})
    def check(options: dict[str, str], token: str, variables: dict[str, str]) -> None:
        env = {
            "SAFETYNET_ARM_TOKEN": token,
            "SAFETYNET_ARM_ENDPOINT": arm.endpoint,
            "REQUESTS_CA_BUNDLE": arm.ca_file,
            "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
            **variables,
        }
        code, out, err = run(argv_of(["audit"], options), env)
        as_json = options.get("--format") == "json" and "--output" not in options
        assert_contract(code, out, err, as_json)
        for report in (workdir / "out").iterdir():
            if report.is_file():
                assert TOKEN not in report.read_text(encoding="utf-8", errors="replace")
        seen.add(code)

    seen: set[int] = set()
    check()
    assert ExitCode.OK in seen


def test_build_function_paths_and_versions(workdir: Path) -> None:
    """build-function: any --output and --python-version ends in 0 or 2, leaving no .partial."""

    @FUZZ
    @given(
        output=paths(workdir),
        version=st.sampled_from(["3.11", "3.12", "eleven", "3", "3.11.1", ""]) | argv_text,
    )
    @example(output=str(workdir / "out" / "f.zip"), version="3.11")
    @example(output=str(workdir / "out" / "0"), version="--")  # argparse leaves a list behind
    def check(output: str, version: str) -> None:
        argv = ["build-function", "--skip-dependencies", f"--output={output}"]
        code, out, err = run([*argv, f"--python-version={version}"], {})
        assert_contract(code, out, err, False, {ExitCode.OK, ExitCode.USAGE})
        assert not list(workdir.rglob("*.partial"))
        seen.add(code)

    seen: set[int] = set()
    check()
    assert ExitCode.OK in seen


def test_function_settings(
    workdir: Path,
    valid_db: str,
    azurite: Azurite,
    existing_container: str,
    function_app: ModuleType,
) -> None:
    """The Function entry: any app settings end in a report or a settings/sweep error, and
    neither its errors nor any log record (the SDK's DEBUG lines included) shows a secret."""

    @FUZZ
    @given(
        settings_=st.fixed_dictionaries(
            {
                "SAFETYNET_DB_URL": st.just(valid_db) | db_urls(workdir) | env_text,
                "SAFETYNET_CONNECTION_STRING": st.just(azurite.connection_string)
                | connection_strings
                | st.just(""),
            },
            optional={
                "SAFETYNET_ACCOUNT_URL": urls,
                "SAFETYNET_CUTOFF": durations | env_text,
                "SAFETYNET_CONTAINER": st.just(existing_container) | names | env_text,
                "SAFETYNET_LEASE": st.sampled_from(["true", "false", "maybe"]),
                "SAFETYNET_ALLOW_CUSTOM_ENDPOINT": st.sampled_from(["false", "1"]),
            },
        )
    )
    @example(
        settings_={
            "SAFETYNET_DB_URL": valid_db,
            "SAFETYNET_CONNECTION_STRING": azurite.connection_string,
            "SAFETYNET_CONTAINER": existing_container,
        }
    )
    def check(settings_: dict[str, str]) -> None:
        refused: Exception | None = None
        try:
            outcomes.append(function_app.sweep_once(settings_))
        except Exception as error:
            refused = error
        if refused is not None:
            assert not isinstance(refused, BUG_TYPES), repr(refused)
            chain = " ".join(_chain(refused))
            assert all(secret not in chain for secret in PLANTED)

    outcomes: list[object] = []
    logs = io.StringIO()
    handler = logging.StreamHandler(logs)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # the SDK's request logs too: the host may forward them
    try:
        check()
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert outcomes  # at least one tick swept for real
    assert "safetynet.sweep.finished" in logs.getvalue()
    assert all(secret not in logs.getvalue() for secret in PLANTED)


def test_verify_options(workdir: Path, azurite: Azurite, existing_container: str) -> None:
    """verify: counts, durations, names, endpoints and paths end in a contract code, cleanly."""

    @FUZZ
    @given(
        options=st.fixed_dictionaries(
            {},
            optional={
                "--max-pending-days": numbers,
                "--sweeper-period": durations | argv_text,
                "--container": names | argv_text,
                "--account-url": urls,
                "--arm-endpoint": urls | argv_text,
                "--second-credential": argv_text,
                "--format": st.sampled_from(["json", "table", "sarif", "junit", "xlsx"]),
                "--output": paths(workdir),
            },
        ),
    )
    @example(options={"--format": "json"})
    def check(options: dict[str, str]) -> None:
        base = {"--connection-string": azurite.connection_string, "--container": existing_container}
        code, out, err = run(argv_of(["verify"], {**base, **options}), {})
        as_json = options.get("--format") == "json" and "--output" not in options
        assert_contract(code, out, err, as_json)
        seen.add(code)

    seen: set[int] = set()
    check()
    assert seen - {ExitCode.USAGE}  # the fuzz reached real probes, not only the option checks
