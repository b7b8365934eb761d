"""`safetynet demo`: local Azurite + SQLite, started and stopped here; exit 0 only if all holds."""

from __future__ import annotations

import argparse
import sys
import time

from azure.storage.blob import BlobServiceClient

from blob_safetynet.cli.demo import render, run_demo
from blob_safetynet.cli.demo_restore import render_restore, run_restore_demo
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite, AzuriteError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="replay the protocol's scenarios and the crash matrix on a local Azurite + SQLite",
    )
    parser.add_argument(
        "--scenario",
        choices=("protocol", "restore"),
        default="protocol",
        help="protocol (default): the scenarios and the crash matrix; restore: the database "
        "restored to an earlier time, then rolled forward from the container",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        with Azurite() as azurite:
            print(f"Azurite listening on 127.0.0.1:{azurite.port} (in memory)", flush=True)
            service = BlobServiceClient.from_connection_string(azurite.connection_string)
            if args.scenario == "restore":
                report = run_restore_demo(service)
                shown = render_restore(report)
            else:
                report = run_demo(service)
                shown = render(report)
    except AzuriteError as error:
        print(f"safetynet demo: {error}", file=sys.stderr)
        return ExitCode.USAGE
    print(shown)
    print(f"finished in {time.monotonic() - started:.1f}s")
    return ExitCode.OK if report.ok else ExitCode.FINDINGS
