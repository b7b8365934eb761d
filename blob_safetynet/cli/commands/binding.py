"""`safetynet binding show|bind|unbind`: which database a container belongs to, set by a person.

A sweep (and reconcile's repairs) run only on a bound pair: the container's marker blob names
the database, and the database names the container. `bind` is the operator's statement that
the pair belongs together; `unbind` takes it back on both sides (after a wrong pair was bound,
say); `show` prints both halves. Exit codes (`blob_safetynet.cli.exitcodes`): 0 done (`show`: the pair
is bound), 1 `show` of a pair that is not bound to each other, 2 bad usage or a half bound to
something else (`bind` refuses it: unbind that pair first), 3 a service cannot be reached.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from azure.storage.blob import ContainerClient

from blob_safetynet.cli.commands.common import CommandError, UsageError, fail
from blob_safetynet.cli.commands.target import (
    TARGET_ERRORS,
    add_target_options,
    classify,
    open_target,
)
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.settings.redaction import printable
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper import binding
from blob_safetynet.sweeper.binding import Binding, ContainerBindingError

Action = Callable[[DocumentStore, ContainerClient], Binding]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "binding", help="show, bind or unbind a database and its blob container"
    )
    actions = parser.add_subparsers(dest="binding_command", required=True, metavar="ACTION")
    for name, help_text, action in (
        (
            "show",
            "print which container the database names and which database the container names",
            binding.read_binding,
        ),
        (
            "bind",
            "state that this database and this container belong together (both sides)",
            binding.bind,
        ),
        (
            "unbind",
            "remove the binding of this database and this container (both sides)",
            binding.unbind,
        ),
    ):
        sub = actions.add_parser(name, help=help_text)
        add_target_options(sub)
        sub.add_argument(
            "--json", action="store_true", help="print one JSON object, also on errors"
        )
        sub.set_defaults(handler=_handler(name, action))


def _handler(name: str, action: Action) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        command = f"binding {name}"
        try:
            store, container = open_target(args)
            try:
                result = action(store, container)
            except ContainerBindingError as error:
                raise UsageError(
                    f"{error}; run `{binding.UNBIND_COMMAND}` on that pair first"
                ) from None
            except TARGET_ERRORS as error:
                raise classify(error, args, started=True) from None
        except CommandError as error:
            return fail(command, error.code, str(error), args.json)
        _print(result, args.json)
        if name == "show" and not result.bound:
            return ExitCode.FINDINGS
        return ExitCode.OK

    return run


def _print(result: Binding, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result.as_dict()))
        return
    names = printable(result.container)
    database_side = result.database_names
    container_side = result.container_names
    print(f"database {result.database_id}: bound to container {_shown(database_side)}")
    print(f"container {names}: bound to database {_shown(container_side)}")
    print("bound to each other" if result.bound else "not bound to each other")


def _shown(value: str | None) -> str:
    if value is None:
        return "(none)"
    return printable(value) if value else "(a marker naming no database)"
