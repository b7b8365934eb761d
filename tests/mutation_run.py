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

from safetynet.azurite import AZURITE_BIN_ENV, Azurite, find_azurite_bin

ROOT = Path(__file__).resolve().parents[1]


def mutmut(
    *args: str, env: dict[str, str], capture: bool = True
) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or "mutmut"
    return subprocess.run(
        [binary, *args], cwd=ROOT, env=env, text=True, capture_output=capture, check=False
    )


def main(argv: list[str]) -> int:
    children = argv[0] if argv else "2"
    with Azurite() as emulator:
        # Tests that start an emulator of their own (the demo) find it from the copy in mutants/.
        env = os.environ | {
            "SAFETYNET_TEST_AZURITE_PORT": str(emulator.port),
            AZURITE_BIN_ENV: str(find_azurite_bin()),
        }
        run = mutmut("run", "--max-children", children, env=env, capture=False)
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
    print(f"mutants by status: {statuses}")
    if judged:
        print(f"score: {killed}/{judged} killed = {100 * killed / judged:.1f}%")
    for name in survivors:
        print(mutmut("show", name, env=env).stdout)
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
