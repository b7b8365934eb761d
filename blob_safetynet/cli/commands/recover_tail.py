"""What `safetynet recover` and `recover --after-restore` share once a plan is in hand: the
errors mapped to exit codes, and the apply under SIGINT/SIGTERM with its report and exit code."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

from blob_safetynet.cli.commands.common import UsageError
from blob_safetynet.cli.commands.interrupt import stop_signals
from blob_safetynet.cli.commands.target import TARGET_ERRORS, classify
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.reconcile.listing import RepairRefusedError


class Stoppable(Protocol):
    @property
    def stopped(self) -> str | None:
        """The signal that stopped the run between two rows, None when it ran to its end."""


Result = TypeVar("Result", bound=Stoppable)


@contextmanager
def refusals_and_target_errors(args: argparse.Namespace) -> Iterator[None]:
    """A refused plan as a usage error (nothing written), the service's and the database's
    errors after the target was opened as the command's own."""
    try:
        yield
    except RepairRefusedError as error:
        raise UsageError(f"refused: {error}") from None
    except TARGET_ERRORS as error:
        raise classify(error, args, started=True) from None


def apply_and_report(
    args: argparse.Namespace,
    apply: Callable[[Callable[[], str | None]], Result],
    report: Callable[[Result, argparse.Namespace], None],
    resolved: Callable[[Result], bool],
) -> int:
    """`apply` (given the stop request to ask between rows) under SIGINT and SIGTERM, then
    `report`: the signal's exit code when one stopped it, 0 when `resolved`, else 1."""
    with stop_signals() as stop:
        result = apply(stop.requested)
    report(result, args)
    if result.stopped is not None:
        return int(stop.exit_code)
    return ExitCode.OK if resolved(result) else ExitCode.FINDINGS
