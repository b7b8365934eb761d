"""`safetynet local`: the embedded Azurite on 127.0.0.1, kept running until Ctrl-C.

The same launcher as `demo`, `verify` and the tests (blob_safetynet/embedded/azurite.py), so the local stack the
docs use is the one the suite runs on. On any port it prints a full connection string with the development account's published key;
on Azurite's default port 10000 the Azure SDKs' shortcut `UseDevelopmentStorage=true` names
the same account
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
from blob_safetynet.embedded.azurite import DEV_ACCOUNT, DEV_KEY, Azurite, AzuriteError
from blob_safetynet.settings import appsettings

DEFAULT_PORT = 10000
"""Azurite's own default blob port, the one `UseDevelopmentStorage=true` names."""
SHORTCUT = "UseDevelopmentStorage=true"
DEV_KEY_PAGE = "https://learn.microsoft.com/en-us/azure/storage/common/storage-connect-azurite#use-the-well-known-storage-account-and-key"
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
    """What a client needs to reach the running emulator, on whatever port it listens: the
    development account's key is public (DEV_KEY_PAGE), so it is printed in full."""
    return {
        "account_url": azurite.blob_endpoint,
        "account_name": DEV_ACCOUNT,
        "account_key": DEV_KEY,
        "account_key_source": DEV_KEY_PAGE,
        "port": azurite.port,
        "pid": azurite.pid,
        "storage": str(location) if location else "memory",
        "connection_string": azurite.connection_string,
        "connection_string_shortcut": SHORTCUT if azurite.port == DEFAULT_PORT else None,
        "stop": "Ctrl-C, or kill -TERM <pid of safetynet local>",
    }


def _render(info: dict[str, Any]) -> str:
    shortcut, full = info["connection_string_shortcut"], info["connection_string"]
    lines = [
        f"Azurite blob service on {info['account_url']} (storage: {info['storage']})",
        f"connection string: {shortcut or full}",
        f"  export {appsettings.CONNECTION_STRING.name}='{shortcut or full}'",
    ]
    if shortcut:
        lines.append(f"  in full (the shortcut names this port only): {full}")
    lines += [
        f"account {info['account_name']}, key {info['account_key']}",
        f"  (the emulator's published development key: {info['account_key_source']})",
        "stop it with Ctrl-C (or SIGTERM); running...",
    ]
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
