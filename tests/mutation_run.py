"""`make mutation`: mutmut over the paths in pyproject's [tool.mutmut], one Azurite for all.

Every mutant's tests would otherwise start their own emulator (about 1.5 s each); here one
runs for the whole session and the tests find it through SAFETYNET_TEST_AZURITE_PORT.
Prints the score and each surviving mutant's diff; docs/reliability.md explains them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks import machine
from benchmarks.__main__ import write_section
from blob_safetynet.embedded.azurite import AZURITE_BIN_ENV, Azurite, find_azurite_bin

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "reliability.md"


def mutmut(
    *args: str, env: dict[str, str], capture: bool = True
) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or "mutmut"
    return subprocess.run(
        [binary, *args], cwd=ROOT, env=env, text=True, capture_output=capture, check=False
    )


def main(argv: list[str]) -> int:
    """`[CHILDREN]` runs mutmut and reports; `--report` only reports the last run."""
    children = argv[0] if argv and argv[0] != "--report" else "2"
    env = dict(os.environ)
    returncode = 0
    if "--report" not in argv:
        with Azurite() as emulator:
            # Tests that start an emulator of their own find the real binary, not mutants/'s.
            env |= {
                "SAFETYNET_TEST_AZURITE_PORT": str(emulator.port),
                AZURITE_BIN_ENV: str(find_azurite_bin()),
            }
            returncode = mutmut(
                "run", "--max-children", children, env=env, capture=False
            ).returncode
    results = mutmut("results", "--all", "true", env=env)
    print(results.stdout)
    statuses: dict[str, int] = {}
    survivors = []
    for line in results.stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            statuses[status] = statuses.get(status, 0) + 1
            if status == "survived":
                survivors.append(name)
    killed = statuses.get("killed", 0)
    judged = killed + statuses.get("survived", 0)
    score = f"{killed}/{judged} killed = {100 * killed / judged:.1f}%" if judged else "none judged"
    print(f"mutants by status: {statuses}\nscore: {score}")
    for name in survivors:
        print(mutmut("show", name, env=env).stdout)
    write_section(
        DOCS,
        "mutation",
        "\n".join(
            [
                "## Mutation run",
                "",
                f"`make mutation` (`python -m tests.mutation_run {children}`, mutmut "
                f"{mutmut('--version', env=env).stdout.split()[-1]}) on {machine.describe()}.",
                "",
                f"Score: {score}. By status: "
                + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
                + ".",
                "",
                "Surviving mutants (each is explained below this section):",
                "",
                *(f"- `{name}`" for name in survivors),
            ]
        ),
    )
    return returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
