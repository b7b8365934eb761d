"""`python -m tests.mutation_rejudge`: the last mutation run's survivors (and any mutants it
left unchecked or timed out) judged by the current tests, without a new run.

mutmut's trampolines read the active mutant from MUTANT_UNDER_TEST at call time, so each
mutant is run in mutants/ (the current tests copied in) against the tests named for its
module, each run limited to PER_MUTANT_S. Writes the `mutation-rejudged` section of
docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from benchmarks.__main__ import write_section
from blob_safetynet.embedded.azurite import Azurite
from tests.mutation_run import DOCS, ROOT, mutmut

PER_MUTANT_S = 45
ORDER = (
    "policies.",
    "blob_safetynet.protocol.blobs.",
    "blob_safetynet.protocol.upload.",
    "blob_safetynet.sweeper.sweep.",
)
"""Fast mutants first, so a budget that runs out leaves the slow ones unjudged."""
TESTS = {
    "blob_safetynet.sweeper.sweep.": [
        "tests/sweeper/test_sweep_contracts.py",
        "tests/sweeper/test_invariants_broken.py",
        "tests/sweeper/test_sweep.py",
        # Intents, retired records and the only-copy check (`_clear_record`, `_only_copy`,
        # `_delete_one`) are exercised only here.
        "tests/sweeper/test_data_safety.py",
        "tests/sweeper/test_sweep_faults.py",
        "tests/sweeper/test_sweep_isolation.py",
        "tests/sweeper/test_review_attacks.py",
        "tests/sweeper/test_lease.py",
        "tests/sweeper/test_heartbeat.py",
        # The per-blob fallback, records under the wrong guard or a lease, the dry run.
        "tests/sweeper/test_sweep_mutants.py",
    ],
    "policies.": [
        "tests/policies/test_rule_messages.py",
        "tests/policies/test_rules.py",
        "tests/policies/test_adapters.py",
    ],
    "sweeper.": [
        "tests/sweeper/test_protocol_contracts.py",
        "tests/sweeper/test_blob_calls.py",
        "tests/sweeper/test_sweep_contracts.py",
        "tests/sweeper/test_crash_matrix.py",
        "tests/sweeper/test_invariants_broken.py",
        "tests/sweeper/test_protocol.py",
        "tests/sweeper/test_sweep.py",
    ],
}


def unresolved(env: dict[str, str], settled: tuple[str, ...] = ("killed",)) -> dict[str, str]:
    """Mutant name -> its status in the last run, for every mutant not `settled` there."""
    lines = mutmut("results", "--all", "true", env=env).stdout.splitlines()
    pairs = (line.strip().rpartition(": ")[::2] for line in lines)
    return {name: status for name, status in pairs if name and status not in settled}


def judge(name: str, env: dict[str, str], extra: dict[str, str] | None = None) -> str:
    """ "killed", "survived" or "timeout": the tests for `name`'s module with that mutant on."""
    files = next(files for prefix, files in TESTS.items() if name.startswith(prefix))
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    try:
        done = subprocess.run(
            [*command, "-m", "not postgres", *files],
            cwd=ROOT / "mutants",
            env=env
            | {"MUTANT_UNDER_TEST": name, "PYTHONPATH": str(ROOT / "mutants")}
            | (extra or {}),
            capture_output=True,
            check=False,
            timeout=PER_MUTANT_S,
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    return "survived" if done.returncode == 0 else "killed"


def restore_policy_tests(commit: str) -> None:
    """tests/policies as of `commit` (the code the run mutated), keeping the pinned messages."""
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", commit, "tests/policies"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in names:
        if "rule_messages" in name:
            continue
        content = subprocess.run(
            ["git", "show", f"{commit}:{name}"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        (ROOT / "mutants" / name).write_bytes(content)


def main(argv: list[str]) -> int:
    """`[--policy-tests-from COMMIT] [--budget SECONDS] [--timeouts killed]`: the first when
    main moved the rules after the run started; with a budget, mutants not started in time stay
    "not judged"; the last leaves the run's timeouts as they are (killed by timeout), for a run
    with a short timeout where a mutant looping forever is the expected timeout."""
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    deadline = time.monotonic() + float(options.get("--budget", "inf"))
    cache_file = ROOT / "mutants" / "rejudged.json"
    cache: dict[str, str] = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    for unmutated in ("tests", "safetynet", "testkit", "sweeper", "benchmarks"):
        shutil.copytree(ROOT / unmutated, ROOT / "mutants" / unmutated, dirs_exist_ok=True)
    if "--policy-tests-from" in options:
        restore_policy_tests(options["--policy-tests-from"])
    env = dict(os.environ)
    before = dict(
        sorted(
            unresolved(
                env, ("killed", "timeout") if options.get("--timeouts") == "killed" else ("killed",)
            ).items(),
            key=lambda item: next(i for i, p in enumerate(ORDER) if item[0].startswith(p)),
        )
    )
    with Azurite() as emulator:
        env["SAFETYNET_TEST_AZURITE_PORT"] = str(emulator.port)
        # The pinned rule messages are those of the code that was mutated (mutants/ is a copy
        # from the run's start), and every test set must pass with no mutant active.
        judge("policies.", env, {"SAFETYNET_REGENERATE_MESSAGES": "1"})
        broken = [prefix for prefix in TESTS if judge(prefix, env) != "survived"]
        if broken:
            print(f"the tests for {broken} fail without any mutant: nothing to judge")
            return 1

        lock = threading.Lock()

        def judged(name: str) -> str:
            if name not in cache:
                if time.monotonic() > deadline:
                    return "not judged"
                verdict = judge(name, env)
                with lock:
                    cache[name] = verdict
                    cache_file.write_text(json.dumps(cache))
            return cache[name]

        with ThreadPoolExecutor(2) as pool:
            now = dict(zip(before, pool.map(judged, before), strict=True))
    rows = Counter((before[n], now[n]) for n in before)
    still = [n for n, verdict in now.items() if verdict == "survived"]
    body = [
        "## Mutants judged again with the tests added since",
        "",
        "`python -m tests.mutation_rejudge`: every mutant the run above did not kill, run "
        f"against the current tests ({PER_MUTANT_S} s limit each):",
        "",
        "| in the run | now | mutants |",
        "| --- | --- | ---: |",
        *(f"| {a} | {b} | {count} |" for (a, b), count in sorted(rows.items())),
        "",
        f"Still surviving ({len(still)}):",
        "",
        *(f"- `{n}`" for n in still),
    ]
    write_section(DOCS, "mutation-rejudged", "\n".join(body))
    print("\n".join(body))
    for name in still:
        print(mutmut("show", name, env=env).stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
