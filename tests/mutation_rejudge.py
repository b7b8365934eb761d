"""`python -m tests.mutation_rejudge`: the last mutation run's survivors judged again by the
current tests, without a new run.

mutmut's trampolines read the active mutant from MUTANT_UNDER_TEST at call time, so each
survivor is run in mutants/ (the current tests copied in) against the tests named for its
module. Writes the `mutation-rejudged` section of docs/reliability.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from benchmarks.__main__ import write_section
from safetynet.azurite import Azurite
from tests.mutation_run import DOCS, ROOT, mutmut

TESTS = {
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


def survivors(env: dict[str, str]) -> list[str]:
    lines = mutmut("results", env=env).stdout.splitlines()
    return [line.strip().rpartition(": ")[0] for line in lines if line.endswith(": survived")]


def killed(name: str, env: dict[str, str], extra: dict[str, str] | None = None) -> bool:
    """Whether the tests for `name`'s module fail with that mutant active ("" for none)."""
    files = next(files for prefix, files in TESTS.items() if name.startswith(prefix))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not postgres",
            *files,
        ],
        cwd=ROOT / "mutants",
        env=env | {"MUTANT_UNDER_TEST": name, "PYTHONPATH": str(ROOT / "mutants")} | (extra or {}),
        capture_output=True,
        check=False,
    )
    return done.returncode != 0


def main() -> int:
    shutil.copytree(ROOT / "tests", ROOT / "mutants" / "tests", dirs_exist_ok=True)
    env = dict(os.environ)
    names = survivors(env)
    with Azurite() as emulator:
        env["SAFETYNET_TEST_AZURITE_PORT"] = str(emulator.port)
        # The pinned rule messages are those of the code that was mutated (mutants/ is a copy
        # from the run's start), and every test set must pass with no mutant active.
        killed("policies.", env, {"SAFETYNET_REGENERATE_MESSAGES": "1"})
        broken = [prefix for prefix in TESTS if killed(prefix, env)]
        if broken:
            print(f"the tests for {broken} fail without any mutant: nothing to judge")
            return 1
        with ThreadPoolExecutor(2) as pool:
            verdicts = dict(zip(names, pool.map(lambda n: killed(n, env), names), strict=True))
    still = [n for n, k in verdicts.items() if not k]
    body = [
        "## Survivors judged again with the tests added since",
        "",
        f"`python -m tests.mutation_rejudge`: {len(names)} survivors of the run above, "
        f"{len(names) - len(still)} now killed, {len(still)} still surviving:",
        "",
        *(f"- `{n}`" for n in still),
    ]
    write_section(DOCS, "mutation-rejudged", "\n".join(body))
    print("\n".join(body))
    for name in still:
        print(mutmut("show", name, env=env).stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
