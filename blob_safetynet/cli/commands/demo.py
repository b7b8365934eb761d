"""`safetynet demo`: local Azurite + SQLite, started and stopped here; exit 0 only if all holds."""

from __future__ import annotations

import argparse
import sys
import time

from azure.storage.blob import BlobServiceClient

from blob_safetynet.cli.demo import render, run_demo
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite, AzuriteError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="replay the protocol's scenarios and the crash matrix on a local Azurite + SQLite",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        with Azurite() as azurite:
            print(f"Azurite listening on 127.0.0.1:{azurite.port} (in memory)", flush=True)
            report = run_demo(BlobServiceClient.from_connection_string(azurite.connection_string))
    except AzuriteError as error:
        print(f"safetynet demo: {error}", file=sys.stderr)
        return ExitCode.USAGE
    print(render(report))
    print(f"finished in {time.monotonic() - started:.1f}s")
    return ExitCode.OK if report.ok else ExitCode.FINDINGS
