"""`make soak`: the interleavings with many more examples and longer runs, the fault tests
repeated, and the crash matrix; the figures go into docs/reliability.md.

`python -m tests.soak_run [EXAMPLES] [STEPS] [FAULT_ROUNDS]` (defaults 2000, 12, 5).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import machine
from benchmarks.__main__ import write_section

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "reliability.md"


def pytest(args: list[str], env: dict[str, str]) -> tuple[str, float, int]:
    """The pytest summary line, the wall time and the exit code."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
    lines = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return (lines[-1].strip("= ") if lines else "no summary"), seconds, done.returncode


def main(argv: list[str]) -> int:
    examples = int(argv[0]) if argv else 2000
    steps = int(argv[1]) if len(argv) > 1 else 12
    rounds = int(argv[2]) if len(argv) > 2 else 5
    env = os.environ | {
        "SAFETYNET_SOAK_EXAMPLES": str(examples),
        "SAFETYNET_SOAK_STEPS": str(steps),
        "PYTHONPATH": str(ROOT),
    }
    interleavings = (
        f"interleavings: {examples} examples of up to {steps} steps",
        ["tests/sweeper/test_interleavings.py"],
    )
    repeated = (
        "faults, crash matrix and broken twins (SQLite and PostgreSQL)",
        [
            "tests/sweeper/test_faults.py",
            "tests/sweeper/test_crash_matrix.py",
            "tests/sweeper/test_data_safety_round3.py",
            "tests/sweeper/test_invariants_broken.py",
        ],
    )
    summary, seconds, failed = pytest(interleavings[1], env)
    rows = [f"| {interleavings[0]} | {summary} | {seconds:.0f} s |"]
    title, args = repeated
    for index in range(rounds):
        summary, seconds, code = pytest(args, env)
        failed |= code
        rows.append(f"| {title}: round {index + 1} | {summary} | {seconds:.0f} s |")
    body = "\n".join(
        [
            "## Soak",
            "",
            f"`make soak` on {machine.describe()}.",
            "",
            "| run | pytest summary | wall time |",
            "| --- | --- | ---: |",
            *rows,
        ]
    )
    write_section(DOCS, "soak", body)
    print(body)
    return failed


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
