"""`safetynet local`: the embedded Azurite on 127.0.0.1, kept running until Ctrl-C.

The same launcher as `demo`, `verify` and the tests (blob_safetynet/embedded/azurite.py), so the local stack the
docs use is the one the suite runs on. On Azurite's default port 10000 the Azure SDKs' shortcut
`UseDevelopmentStorage=true` is the whole connection string
(https://learn.microsoft.com/en-us/azure/storage/common/storage-use-azurite#connection-strings).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from blob_safetynet.cli.commands.common import ascii_int, fail
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import DEV_ACCOUNT, Azurite, AzuriteError
from blob_safetynet.settings import appsettings

DEFAULT_PORT = 10000
"""Azurite's own default blob port, the one `UseDevelopmentStorage=true` names."""
SHORTCUT = "UseDevelopmentStorage=true"
DEV_KEY_PAGE = "https://learn.microsoft.com/en-us/azure/storage/common/storage-use-azurite#http-connection-strings"
POLL_S = 0.5


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "local",
        help="run the embedded Azurite (blob service) on 127.0.0.1 until Ctrl-C",
        description="Start the pinned Azurite on 127.0.0.1, print its account URL and "
        "connection string, and keep it running until Ctrl-C (or SIGTERM); exit 0 then.",
    )
    parser.add_argument(
        "--port",
        type=ascii_int,
        default=DEFAULT_PORT,
        help=f"blob port on 127.0.0.1; 0 picks a free one (default {DEFAULT_PORT}, where "
        f"{SHORTCUT} works)",
    )
    parser.add_argument(
        "--location",
        type=Path,
        help="keep the data in this folder across runs (default: in memory, gone at exit)",
    )
    parser.add_argument("--json", action="store_true", help="print the details as one JSON object")
    parser.set_defaults(handler=run)


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _check(args: argparse.Namespace) -> str | None:
    """Why the options cannot be used, or None."""
    if not 0 <= args.port <= 65535:
        return f"--port {args.port} is not a port (0-65535)"
    if args.location is not None and not args.location.is_dir():
        return f"--location {args.location} is not a folder"
    if args.port and _port_in_use(args.port):
        return (
            f"port {args.port} on 127.0.0.1 is in use (another Azurite?); stop it or pass "
            "--port 0 for a free port"
        )
    return None


def details(azurite: Azurite, location: Path | None) -> dict[str, Any]:
    """What a client needs to reach the running emulator; no key unless it is the shortcut's."""
    shortcut = azurite.port == DEFAULT_PORT
    return {
        "account_url": azurite.blob_endpoint,
        "account_name": DEV_ACCOUNT,
        "port": azurite.port,
        "pid": azurite.pid,
        "storage": str(location) if location else "memory",
        "connection_string": SHORTCUT if shortcut else None,
        "connection_string_template": (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey=<key>;"
            f"BlobEndpoint={azurite.blob_endpoint};"
        ),
        "account_key": f"Azurite's published development key, {DEV_KEY_PAGE}",
        "stop": "Ctrl-C, or kill -TERM <pid of safetynet local>",
    }


def _render(info: dict[str, Any]) -> str:
    connection = info["connection_string"] or (
        f"{info['connection_string_template']}  (<key>: {info['account_key']})"
    )
    lines = [
        f"Azurite blob service on {info['account_url']} (storage: {info['storage']})",
        f"connection string: {connection}",
    ]
    if info["connection_string"]:
        lines.append(f"  export {appsettings.CONNECTION_STRING.name}='{connection}'")
    lines.append("stop it with Ctrl-C (or SIGTERM); running...")
    return "\n".join(lines)


class _Stop(Exception):
    """SIGTERM, turned into the same clean stop as Ctrl-C."""


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def run(args: argparse.Namespace) -> int:
    problem = _check(args)
    if problem:
        return fail("local", ExitCode.USAGE, problem, args.json)
    previous = signal.signal(signal.SIGTERM, _on_term)
    azurite = Azurite(location=args.location, port=args.port)
    try:
        azurite.start()
        info = details(azurite, args.location)
        print(json.dumps(info) if args.json else _render(info), flush=True)
        while not azurite.exited():
            time.sleep(POLL_S)
        return fail("local", ExitCode.SERVICE_FAILED, "Azurite exited on its own", args.json)
    except AzuriteError as error:
        return fail("local", ExitCode.USAGE, str(error), args.json)
    except (KeyboardInterrupt, _Stop):
        if not args.json:
            print("stopped", file=sys.stderr)
        return ExitCode.OK
    finally:
        azurite.stop()
        signal.signal(signal.SIGTERM, previous)
