"""`safetynet build-function`: the sweeper's deployment zip. Exit 0 built, 2 could not build."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.infra.function_zip import (
    DEFAULT_OUTPUT,
    DEFAULT_PYTHON_VERSION,
    BuildError,
    build_zip,
)
from blob_safetynet.settings.redaction import printable


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "build-function",
        help="build the sweeper's Azure Functions zip with Linux x86-64 wheels",
    )
    parser.add_argument(
        "--output",
        type=_zip_path,
        default=DEFAULT_OUTPUT,
        help=f"zip to write (default {DEFAULT_OUTPUT})",
    )
    parser.add_argument(
        "--python-version",
        default=DEFAULT_PYTHON_VERSION,
        help=f"the function app's Python version, as the infra program sets it "
        f"(default {DEFAULT_PYTHON_VERSION})",
    )
    parser.add_argument(
        "--skip-dependencies",
        action="store_true",
        help="code only, no wheels: for inspecting the layout, not for deploying",
    )
    parser.set_defaults(handler=run)


def _zip_path(text: str) -> Path:
    """A file path for the zip: not empty, not a directory (`.`, `dir/`, an existing one)."""
    path = Path(text)
    if (
        not text.strip()
        or text.endswith(("/", "\\"))
        or _is_folder(path)
        or path.name in ("", ".", "..")
    ):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a file path for the zip"
        )  # escaped by Parser.error
    return path


def _is_folder(path: Path) -> bool:
    """Whether `path` is a folder; a name the system cannot look up (too long, a NUL) is left
    to the output check before the build, which names the reason."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        result = build_zip(
            args.output,
            python_version=args.python_version,
            with_dependencies=not args.skip_dependencies,
        )
    except (BuildError, OSError) as error:
        print(f"safetynet build-function: {printable(str(error))}", file=sys.stderr)
        return ExitCode.USAGE
    contents = "code only, NOT deployable" if not result.with_dependencies else "code and wheels"
    print(
        f"wrote {printable(str(result.path))} ({result.entries} files, {result.size / 2**20:.1f} MiB, {contents}) "
        f"for Python {args.python_version} on Linux x86-64 in {time.monotonic() - started:.0f} s"
    )
    return ExitCode.OK
