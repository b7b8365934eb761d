"""`python -m benchmarks [NAME ...]`: run benchmarks and write their sections into the docs.

Each section lives between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` in
docs/benchmarks.md; only the sections run now are replaced, so benchmarks owned by different
people (and run at different times) coexist in one file.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks import machine
from blob_safetynet.embedded.azurite import PROJECT_ROOT

DOCS = PROJECT_ROOT / "docs" / "benchmarks.md"
BENCHMARKS = (
    "sweep",
    "audit",
    "protocol",
    "startup",
    "inventory",
    "adopt",
    "fleet",
    "recover",
    "recover_inventory",
)
"""In the order `make bench` runs them."""

HEADER = """# Benchmarks

`make bench` measures each claim of the project with its baseline and its candidate side by side
in one run, on the machine it runs on; every section below names that machine and the date.
Benchmarks report, they do not fail: a missed target says MISS and why.

First written on: {machine}.
"""


def _load(name: str) -> Callable[[], str] | None:
    """The module's `run`, or None (with a note) when that benchmark does not exist yet."""
    module_name = f"benchmarks.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise  # a missing dependency of an existing benchmark is a real failure
        print(f"benchmarks: {module_name} does not exist yet; skipping {name}", file=sys.stderr)
        return None
    run: Callable[[], str] = module.run
    return run


def write_section(path: Path, name: str, body: str) -> None:
    """Replace (or append) one marked section; the file is locked against a parallel run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    section = f"{begin}\n{body.strip()}\n{end}"
    with path.open("a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read() or HEADER.format(machine=machine.describe())
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if pattern.search(text):
            text = pattern.sub(lambda _: section, text, count=1)
        else:
            text = f"{text.rstrip()}\n\n{section}\n"
        handle.seek(0)
        handle.truncate()
        handle.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of {', '.join(BENCHMARKS)}")
    names: list[str] = parser.parse_args(argv).names or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(
            f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}"
        )
    for name in names:
        run = _load(name)
        if run is None:
            continue
        print(f"benchmarks: running {name} ...", file=sys.stderr)
        body = run()
        write_section(DOCS, name, body)
        print(body)
        print(f"benchmarks: wrote the {name} section of {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
