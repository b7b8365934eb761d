"""`python -m tests.mutation_file blob_safetynet/sweeper/sweep.py`: mutmut over one file, its timeouts judged
again, in a copy of the tree.

`make mutation` over everything does not finish on a shared 2-core machine: mutants of
`sweep.py` that loop forever hit mutmut's limit one after another. This runs one file with a
short timeout (`--timeout-multiplier`, default 2) so such mutants end fast, and then runs every
mutant mutmut timed out once more, alone, with the tests mutmut chose for it and
`--rejudge-multiplier` x their own time: a mutant that passes there survived, one that fails
was killed, one still running at the limit is reported as a timeout, not as killed.
The copy is a temporary directory (the worktree's tracked and new files), so no `mutants/`
is left in the tree. Writes the `mutation-file-<stem>` section of docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

from benchmarks import machine
from benchmarks.__main__ import write_section
from blob_safetynet.embedded.azurite import AZURITE_BIN_ENV, Azurite, find_azurite_bin
from tests.mutation_rejudge import TESTS
from tests.mutation_run import DOCS, ROOT

MUTMUT = [sys.executable, "-m", "mutmut"]
STARTUP_S = 20.0
"""pytest's own start (imports, collection) and one Azurite container, on a loaded machine."""


def copy_tree(target: Path) -> None:
    """The worktree's tracked files and new (unignored) ones, as they are on disk now."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def tests_for(module: str) -> list[str]:
    return next(files for prefix, files in TESTS.items() if f"{module}.".startswith(prefix))


def configure(target: Path, path: str, tests: list[str], timeout_multiplier: float) -> None:
    """The copy's [tool.mutmut]: the one file, its module's tests, the short timeout."""
    pyproject = target / "pyproject.toml"
    text = pyproject.read_text()
    mutmut = tomllib.loads(text)["tool"]["mutmut"]
    mutmut |= {
        "only_mutate": [path],
        "pytest_add_cli_args_test_selection": tests,
        "timeout_multiplier": timeout_multiplier,
    }
    start = text.index("[tool.mutmut]")
    end = text.index("\n[", start + 1)
    # TOML strings, lists of strings and floats are written the same as JSON.
    section = "\n".join(f"{key} = {json.dumps(value)}" for key, value in mutmut.items())
    pyproject.write_text(f"{text[:start]}[tool.mutmut]\n{section}\n{text[end:]}")


def statuses(copy: Path, env: dict[str, str], module: str) -> dict[str, str]:
    """Mutant name -> mutmut's status, for the mutants of `module`."""
    lines = subprocess.run(
        [*MUTMUT, "results", "--all", "true"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    pairs = (line.strip().rpartition(": ")[::2] for line in lines)
    return {name: status for name, status in pairs if name.startswith(f"{module}.")}


def judge(copy: Path, env: dict[str, str], name: str, tests: list[str], limit: float) -> str:
    """ "killed", "survived" or "timeout": `tests` (pytest node ids) with mutant `name` on."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    try:
        done = subprocess.run(
            [*command, "-m", "not postgres", *tests],
            cwd=copy / "mutants",
            env=env
            | {
                "MUTANT_UNDER_TEST": name,
                # mutants/ first; then wherever mutmut itself is installed, if not in the venv.
                "PYTHONPATH": os.pathsep.join([str(copy / "mutants"), env.get("PYTHONPATH", "")]),
            },
            capture_output=True,
            check=False,
            timeout=limit,
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    return "survived" if done.returncode == 0 else "killed"


def rejudge(copy: Path, env: dict[str, str], name: str, multiplier: float) -> str:
    """A mutant mutmut timed out, run alone: the tests mutmut chose for it, fastest first, with
    `multiplier` x their own time (as mutmut measured it) plus a start-up allowance."""
    stats = json.loads((copy / "mutants" / "mutmut-stats.json").read_text())
    function = name.rpartition("__mutmut_")[0]
    durations = stats["duration_by_test"]
    tests = sorted(stats["tests_by_mangled_function_name"].get(function, []), key=durations.get)
    limit = multiplier * (sum(durations[t] for t in tests) + 1) + STARTUP_S
    return judge(copy, env, name, tests, limit)


RUN_TESTS = ".tests-of-the-run"
"""Where a kept copy keeps the test files of its first run, as they were then."""


def changed_tests(copy: Path, tests: list[str]) -> list[str]:
    """Of `tests`, the files that differ from those the copy's first run used: copied into it,
    so a mutant the run let live can be judged by the tests written since. The first run's
    files are kept aside, so a second `--copy` still sees every change since that run."""
    changed = []
    for name in tests:
        now, then, first = ROOT / name, copy / name, copy / RUN_TESTS / name
        if then.exists() and not first.exists():
            first.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(then, first)
        if not first.exists() or now.read_bytes() != first.read_bytes():
            changed.append(name)
            then.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(now, then)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation_file", description=__doc__)
    parser.add_argument("path", help="the file to mutate, e.g. blob_safetynet/sweeper/sweep.py")
    parser.add_argument("--max-children", default="2")
    parser.add_argument("--timeout-multiplier", type=float, default=2.0)
    parser.add_argument("--rejudge-multiplier", type=float, default=5.0)
    parser.add_argument(
        "--budget", type=float, default=float("inf"), help="seconds of re-judging at most"
    )
    parser.add_argument("--keep", action="store_true", help="leave the copy (its path is printed)")
    parser.add_argument(
        "--copy",
        type=Path,
        help="no new run (but see --only): re-judge a kept copy's timeouts, and its survivors "
        "with the tests "
        "changed since",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only these mutants (repeatable): a function or method name such as _chunks, "
        "or a mutmut glob with a dot in it, such as 'blob_safetynet.sweeper.sweep.x*_send_batch__mutmut_6?'; "
        "with --copy, those of them the kept run did not check are run there first",
    )
    parser.add_argument(
        "--no-run",
        action="store_true",
        help="with --copy and --only: re-judge only, run no mutant the kept run did not check",
    )
    options = parser.parse_args(argv)
    module = options.path.removesuffix(".py").replace("/", ".")
    only = [mutant_glob(module, name) for name in options.only]
    tests = tests_for(module)
    copy = options.copy or Path(tempfile.mkdtemp(prefix="mutation-"))
    print(f"copy: {copy}", flush=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    # mutmut puts mutants/ first on the path; this tree's own sweeper must not come before it.
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ) | {
        "PYTHONPATH": os.pathsep.join(p for p in path if Path(p).resolve() != ROOT)
    }
    returncode = 0
    try:
        with Azurite() as emulator:
            env |= {
                "SAFETYNET_TEST_AZURITE_PORT": str(emulator.port),
                AZURITE_BIN_ENV: str(find_azurite_bin()),
            }
            names = only if options.copy is None else []
            if options.copy is None:
                copy_tree(copy)
                configure(copy, options.path, tests, options.timeout_multiplier)
            elif only and not options.no_run:
                # A kept run stopped early goes on: its mutants of these names not checked yet.
                names = [
                    name
                    for name, status in statuses(copy, env, module).items()
                    if status == "not checked" and any(fnmatch(name, p) for p in only)
                ]
            if options.copy is None or names:
                returncode = subprocess.run(
                    [*MUTMUT, "run", "--max-children", options.max_children, *names],
                    cwd=copy,
                    env=env,
                    check=False,
                ).returncode
            in_run = {
                name: status
                for name, status in statuses(copy, env, module).items()
                if not only or any(fnmatch(name, pattern) for pattern in only)
            }
            print(f"in the run: {dict(Counter(in_run.values()))}", flush=True)
            changed = changed_tests(copy, tests) if options.copy else []
            for unmutated in ("tests", "safetynet", "testkit", "sweeper", "benchmarks"):
                shutil.copytree(copy / unmutated, copy / "mutants" / unmutated, dirs_exist_ok=True)
            clean = judge(copy, env, "", tests, 900)
            if clean != "survived":
                print(f"the tests fail ({clean}) without any mutant: nothing to re-judge")
                return 1
            started_clean = time.monotonic()
            if changed and judge(copy, env, "", changed, 900) != "survived":
                print("the changed tests fail without any mutant: nothing to re-judge")
                return 1
            changed_s = time.monotonic() - started_clean
            now = {}
            deadline = time.monotonic() + options.budget
            # Survivors first: only the changed tests run for them, and they do not loop.
            for name, status in sorted(in_run.items(), key=lambda item: item[1] == "timeout"):
                now[name] = status
                again = status == "timeout" or (status in ("survived", "no tests") and changed)
                if again and time.monotonic() > deadline:
                    now[name] = "not re-judged"
                elif again:
                    # The tests written since first: they were written to kill these.
                    if changed:
                        limit = options.rejudge_multiplier * changed_s
                        now[name] = judge(copy, env, name, changed, limit)
                    if status == "timeout" and now[name] != "killed":
                        now[name] = rejudge(copy, env, name, options.rejudge_multiplier)
                if now[name] != status:
                    print(f"{name}: {status} -> {now[name]}", flush=True)
        finished = time.strftime("%H:%M UTC", time.gmtime())
        when = f"{started}-{finished}"
        body = report(options, module, tests, changed, in_run, now, when, copy, env)
        print(body)
        for name, status in now.items():
            if status in ("survived", "timeout"):
                print(mutmut_show(copy, env, name))
        # A partial run has its own section: it does not replace the whole file's figures.
        partial = "-only" if options.only else ""
        write_section(DOCS, f"mutation-file-{Path(options.path).stem}{partial}", body)
        return returncode
    finally:
        if options.keep or options.copy:
            print(f"copy kept: {copy}")
        else:
            shutil.rmtree(copy, ignore_errors=True)


def mutant_glob(module: str, name: str) -> str:
    """`_chunks` -> the glob of its mutants' names (`blob_safetynet.sweeper.sweep.x__chunks__mutmut_*`, or
    `blob_safetynet.sweeper.sweep.xǁSweeperǁ_bind__mutmut_*` for a method); a name with a dot is a glob
    already."""
    return name if "." in name else f"{module}.x*{name}__mutmut_*"


def mutmut_show(copy: Path, env: dict[str, str], name: str) -> str:
    return subprocess.run(
        [*MUTMUT, "show", name], cwd=copy, env=env, capture_output=True, text=True, check=False
    ).stdout


def report(
    options: argparse.Namespace,
    module: str,
    tests: list[str],
    changed: list[str],
    in_run: dict[str, str],
    now: dict[str, str],
    when: str,
    copy: Path,
    env: dict[str, str],
) -> str:
    after = Counter(now.values())
    killed = after["killed"]
    judged = killed + after["survived"]
    score = f"{killed}/{judged} killed = {100 * killed / judged:.1f}%" if judged else "none judged"
    rows = Counter((in_run[n], now[n]) for n in in_run)
    unsettled = sorted(n for n, status in now.items() if status != "killed")
    alive = [n for n in unsettled if now[n] in ("survived", "timeout")]
    by_function = Counter(
        (n.removeprefix(f"{module}.").rpartition("__mutmut_")[0], now[n]) for n in unsettled
    )
    functions = sorted({f for f, _ in by_function})
    columns = sorted({s for _, s in by_function})
    version = subprocess.run(
        [*MUTMUT, "--version"], cwd=copy, env=env, capture_output=True, text=True, check=False
    ).stdout.split()[-1:]
    return "\n".join(
        [
            f"## Mutation run of `{options.path}` alone"
            + (", chosen functions" if options.only else ""),
            "",
            f"`python -m tests.mutation_file {options.path} --max-children "
            f"{options.max_children} --timeout-multiplier {options.timeout_multiplier:g} "
            f"--rejudge-multiplier {options.rejudge_multiplier:g}"
            + (f" --copy {options.copy}" if options.copy else "")
            + (f" --budget {options.budget:g}" if options.budget != float("inf") else "")
            + "".join(f" --only '{name}'" for name in options.only)
            + "` (`make mutation-file`; "
            + f"mutmut {' '.join(version)}), {when}, on {machine.describe()}. "
            f"Tests: {', '.join(f'`{t.rpartition(chr(47))[2]}`' for t in tests)}, without "
            "PostgreSQL.",
            "",
            f"{len(in_run)} mutants. Every mutant mutmut timed out was run again alone, with the "
            f"tests mutmut chose for it and {options.rejudge_multiplier:g} x their own time (plus "
            f"{STARTUP_S:g} s to start): a timeout there too is still not counted as killed. "
            + (
                f"Survivors of a kept run (`--copy`) were run again with the test files changed "
                f"since it: {', '.join(f'`{t}`' for t in changed)}. "
                if changed
                else ""
            )
            + (
                f"Re-judging stopped after {options.budget:g} s (`--budget`): mutants not "
                "reached are `not re-judged`. "
                if options.budget != float("inf")
                else ""
            )
            + f"Score: {score}; "
            + ", ".join(f"{k} {v}" for k, v in sorted(after.items()))
            + ".",
            "",
            "| in the run | after re-judging | mutants |",
            "| --- | --- | ---: |",
            *(f"| {a} | {b} | {count} |" for (a, b), count in sorted(rows.items())),
            "",
            "Not killed, by function:",
            "",
            "| function | " + " | ".join(columns) + " |",
            "| --- |" + " ---: |" * len(columns),
            *(
                f"| `{f}` | " + " | ".join(str(by_function[f, c]) for c in columns) + " |"
                for f in functions
            ),
            "",
            f"Survived or timed out ({len(alive)}; each is explained in the text above this "
            "section):",
            "",
            ", ".join(f"`{n.removeprefix(module + '.')}` ({now[n]})" for n in alive),
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
