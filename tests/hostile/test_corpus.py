"""Every hostile value of the corpus through every command, in-process and a few as real
processes: each run ends with a documented exit code (never INTERNAL), no traceback, no raw
control character, JSON when asked for, and its canary secret in no output channel (stdout,
stderr with every log record down to DEBUG, and every file left in the scratch folder)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from azure.core.exceptions import AzureError
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.settings.vocabulary import HEARTBEAT_BLOB, PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper.lease import ACQUIRED, HOLDER, LEASE_BLOB
from testkit.arm_fake import SUBSCRIPTION, FakeArm, compliant_account
from tests import tree
from tests.hostile.corpus import UNICODE, Case, cases

DOCUMENTED = frozenset(ExitCode) - {ExitCode.INTERNAL}
PLANTED_NAMES = (
    "x\x9b[2J\x7fy\x85z",
    "t\tab",
    f"u{UNICODE}",
    "a" * 1000,
    "line\nbreak",
    "sp ace/%2e%2e/x",
)
"""Blob names in the target container, shown by reconcile and sweep: C1 CSI, DEL, NEL, tab,
newline, bidi overrides, very long. Not C0 controls such as ESC: Azurite answers List Blobs
with 500 for them (XML 1.0 cannot carry them; Azure encodes such names instead, List Blobs
`Encoded="true"`: https://learn.microsoft.com/rest/api/storageservices/list-blobs)."""
FLAGS = frozenset({"--json", "--lease", "--skip-dependencies"})


@dataclass
class Lab:
    """What a case runs against: scratch folder, a valid database, containers, the ARM fake."""

    work: Path
    db_url: str
    db_file: Path
    azurite: Azurite
    container: ContainerClient
    verify_container: ContainerClient
    arm: FakeArm
    inputs: set[Path]


@pytest.fixture(scope="module")
def lab(
    tmp_path_factory: pytest.TempPathFactory, azurite: Azurite, service_client: BlobServiceClient
) -> Iterator[Lab]:
    work = tmp_path_factory.mktemp("hostile")
    (work / "afile").write_text("x", encoding="utf-8")
    (work / "adir").mkdir()
    (work / "out").mkdir()
    db_file = work / "documents.db"
    store = DocumentStore.from_url(f"sqlite:///{db_file}")
    store.init_schema()
    store.engine.dispose()
    (work / "link-to-db").symlink_to(db_file)
    container = service_client.create_container("hostile-corpus")
    for name in PLANTED_NAMES:
        container.upload_blob(name, b"x", tags={STATE_TAG: PENDING, "t": "a b+c-d.e/f:g=h_i"})
    verify_container = service_client.create_container("hostile-verify")
    before = Path.cwd()
    os.chdir(work)
    try:
        with FakeArm() as arm:
            arm.add(compliant_account("good", "rg-docs"))
            yield Lab(
                work,
                f"sqlite:///{db_file}",
                db_file,
                azurite,
                container,
                verify_container,
                arm,
                set(),
            )
    finally:
        os.chdir(before)
        container.delete_container()
        verify_container.delete_container()


def expand(text: str, case: Case, lab: Lab) -> str:
    return (
        text.replace("{canary}", case.canary)
        .replace("{work}", str(lab.work))
        .replace("{db}", str(lab.db_file))
        .replace("{azurite}", lab.azurite.blob_endpoint)
    )


def base_argv(case: Case, lab: Lab) -> dict[str, str]:
    """The command's options for a run that would succeed, before the case's value goes in."""
    blob = {"--connection-string": lab.azurite.connection_string}
    if case.command == "db init":
        return {"--db": f"sqlite:///{lab.work}/init-{case.number}.db"}
    if case.command == "db upgrade":
        return {"--db": lab.db_url}
    if case.command == "sweep":
        return {"--db": lab.db_url, **blob, "--container": lab.container.container_name}
    if case.command == "reconcile":
        target = {"--db": lab.db_url, **blob, "--container": lab.container.container_name}
        return {**target, "--older-than": "1s"}
    if case.command == "audit":
        return {"--subscription": SUBSCRIPTION}
    if case.command == "verify":
        return {**blob, "--container": lab.verify_container.container_name}
    return {"--skip-dependencies": "", "--output": f"{lab.work}/out/f.zip"}


def wants_json(case: Case) -> dict[str, str]:
    """Half the cases ask for JSON (every other one), where the command offers it."""
    if case.number % 2 or case.command == "build-function":
        return {}
    if case.command in ("audit", "verify"):
        return {"--format": "json"}
    return {"--json": ""}


def environment(case: Case, lab: Lab) -> dict[str, str]:
    """The canary rides in the ARM token (a secret by definition) for every command; audit
    really authenticates with it."""
    env = {"SAFETYNET_ARM_TOKEN": case.canary}
    if case.command == "audit":
        env.update(
            SAFETYNET_ARM_ENDPOINT=lab.arm.endpoint,
            REQUESTS_CA_BUNDLE=lab.arm.ca_file,
            AZURE_SUBSCRIPTION_ID=SUBSCRIPTION,
        )
    return env


def plant(case: Case, value: str, lab: Lab, options: dict[str, str]) -> None:
    """Puts a data slot's value where the command reads it."""
    if case.slot == "plan-file":
        plan = lab.work / f"plan-{case.number}.json"
        plan.write_bytes(value.encode("latin-1"))
        lab.inputs.add(plan)
        options.update({"--apply-plan": str(plan), "--max-delete": "1"})
    elif case.slot == "heartbeat":
        lab.verify_container.upload_blob(HEARTBEAT_BLOB, value.encode("latin-1"), overwrite=True)
    elif case.slot == "lease-acquired":
        blob = lab.container.get_blob_client(LEASE_BLOB)
        blob.upload_blob(b"", overwrite=True)
        lease = blob.acquire_lease(lease_duration=15)
        blob.set_blob_metadata({HOLDER: "elsewhere", ACQUIRED: value}, lease=lease)
        options["--lease"] = ""


def release_lease(lab: Lab) -> None:
    with contextlib.suppress(AzureError):
        lab.container.get_blob_client(LEASE_BLOB).delete_blob()
    with contextlib.suppress(AzureError):
        from azure.storage.blob import BlobLeaseClient

        BlobLeaseClient(lab.container.get_blob_client(LEASE_BLOB)).break_lease(0)


def command_line(case: Case, lab: Lab) -> tuple[list[str], dict[str, str]]:
    """The argv (`--option=value` words, so a value starting with '-' stays a value) and the
    environment of one case."""
    options = {**base_argv(case, lab), **wants_json(case)}
    env = environment(case, lab)
    value = expand(case.value, case, lab)
    if case.slot.startswith("--"):
        options[case.slot] = value
        if case.slot == "--account-url":
            # The account URL is the target: the blob endpoint rule and the database are
            # judged before any credential or connection (a missing file stops it there).
            options.pop("--connection-string", None)
            if "--db" in options:
                options["--db"] = f"sqlite:///{lab.work}/missing.db"
    elif case.slot.startswith(("SAFETYNET_", "AZURE_")):
        env[case.slot] = value
    else:
        plant(case, value, lab, options)
    argv = [*case.command.split()]
    argv += [o if o in FLAGS else f"{o}={v}" for o, v in options.items()]
    return argv, env


@contextlib.contextmanager
def isolated(env: Mapping[str, str]) -> Iterator[None]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SAFETYNET_", "AZURE_"))}
    with mock.patch.dict(os.environ, {**clean, **env}, clear=True):
        yield


def run_in_process(argv: list[str], env: Mapping[str, str]) -> tuple[int, str, str]:
    """`blob_safetynet.cli.main.main` with every logger at DEBUG (the SDK's request lines too)."""
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)
    try:
        with isolated(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exit_:
                code = int(exit_.code or 0)
    finally:
        root.setLevel(level)
    return code, out.getvalue(), err.getvalue()


def check_channels(case: Case, lab: Lab, code: int, out: str, err: str, as_json: bool) -> None:
    assert code in DOCUMENTED, f"{case.id} exit {code}: {err[-2000:]}"
    assert "Traceback" not in err, err[-2000:]
    raw = {c for c in out + err if unicodedata.category(c) in ("Cc", "Cf") and c != "\n"}
    assert not raw, f"{case.id}: unescaped {raw!r} in {(out + err)[-500:]!r}"
    assert case.canary not in out, out[-2000:]
    assert case.canary not in err, err[-2000:]
    secret = case.canary.encode()
    for path in lab.work.rglob("*"):
        if path.is_file() and not path.is_symlink() and path not in lab.inputs:
            assert secret not in path.read_bytes(), f"{case.id}: canary in {path}"
    assert not (lab.work / "pwned").exists()
    if as_json:
        lines = out.strip().splitlines()
        try:
            document = json.loads(out)
        except json.JSONDecodeError:
            document = json.loads(lines[-1]) if lines else None
        assert isinstance(document, dict), f"{case.id}: no JSON object in {out[-500:]!r}"


CASES = cases(full=os.environ.get("SAFETYNET_HOSTILE_FULL") == "1")


def parameters() -> list[object]:
    return [pytest.param(case, id=case.id) for case in CASES]


@pytest.mark.parametrize("case", parameters())
def test_a_hostile_value_is_refused_or_used_cleanly(case: Case, lab: Lab) -> None:
    """The case's value in its slot: a documented exit code, clean output, canary nowhere."""
    argv, env = command_line(case, lab)
    lab.arm.token = case.canary
    try:
        code, out, err = run_in_process(argv, env)
    finally:
        if case.slot == "lease-acquired":
            release_lease(lab)
    as_json = bool(wants_json(case)) and "--output" not in case.slot
    check_channels(case, lab, code, out, err, as_json)


SUBPROCESS_SLOTS = (
    ("db init", "--db"),
    ("sweep", "--account-url"),
    ("reconcile", "plan-file"),
    ("audit", "--arm-endpoint"),
    ("verify", "heartbeat"),
    ("build-function", "--output"),
)


def subprocess_cases() -> list[Case]:
    """The first case of a few slots whose value a real command line can carry (no NUL)."""
    chosen = []
    for command, slot in SUBPROCESS_SLOTS:
        chosen.append(
            next(
                c for c in CASES if (c.command, c.slot) == (command, slot) and "\x00" not in c.value
            )
        )
    return chosen


@pytest.mark.parametrize("case", subprocess_cases(), ids=lambda c: c.id)
def test_a_hostile_value_through_a_real_process(case: Case, lab: Lab) -> None:
    """The same through the installed console script: what a shell and a pipeline see."""
    argv, env = command_line(case, lab)
    lab.arm.token = case.canary
    with isolated(env):
        result = subprocess.run(
            [str(tree.CONSOLE_SCRIPT), *argv],
            capture_output=True,
            check=False,
            timeout=120,
            cwd=lab.work,
            env=tree.environment(),
        )
    out = result.stdout.decode("utf-8", "replace")
    err = result.stderr.decode("utf-8", "replace")
    as_json = bool(wants_json(case)) and "--output" not in case.slot
    check_channels(case, lab, result.returncode, out, err, as_json)
