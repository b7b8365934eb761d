"""The exit-code contract of every `safetynet` command, defined once.

Each code means one thing, whatever the command, so a pipeline can act on it without knowing
which command ran. `--help` and docs/cli.md print `MEANINGS`.
"""

from __future__ import annotations

import enum
import textwrap
from typing import Final


class ExitCode(enum.IntEnum):
    OK = 0
    FINDINGS = 1
    USAGE = 2
    INCOMPLETE = 3
    SERVICE_FAILED = 4
    INTERNAL = 5
    EXPIRING = 6
    """`safetynet recover`: a kept copy the plan needs expires within the horizon."""
    INTERRUPTED = 130
    """128 + SIGINT (2), what a shell reports for a command stopped by Ctrl-C."""
    TERMINATED = 143
    """128 + SIGTERM (15), what a shell reports for a command stopped by `kill`."""


MEANINGS: Final = {
    ExitCode.OK: "done; nothing needs attention",
    ExitCode.FINDINGS: "done, and something needs attention: a rule failed, a row could not be "
    "swept, the container and the table disagree",
    ExitCode.USAGE: "bad usage or configuration (an option, variable or target is wrong); "
    "nothing was changed",
    ExitCode.INCOMPLETE: "could not look: authentication failed, a permission is missing, an "
    "endpoint or the database is unreachable, or outcomes are unknown (never 'compliant')",
    ExitCode.SERVICE_FAILED: "the database or the blob service failed mid-run; what finished is "
    "reported and running again finishes the rest",
    ExitCode.INTERNAL: "a bug in safetynet: an unexpected error, reported without a traceback",
    ExitCode.EXPIRING: "recover only: a kept copy (or deleted container) the plan needs expires "
    "within --expiry-horizon days; apply the plan now",
    ExitCode.INTERRUPTED: "stopped by SIGINT (Ctrl-C) between two chunks: what finished is "
    "reported, claims and the lease are released; running again finishes the rest",
    ExitCode.TERMINATED: "stopped by SIGTERM the same way as by SIGINT",
}

REDACTION_PROMISE: Final = (
    "Secrets: nothing safetynet prints, logs or writes shows a password, a query string (SAS), "
    "an account key or a token. Database URLs appear as scheme://host:port/database, account "
    "URLs without their query string, connection strings as their blob endpoint; names taken "
    "from users or the container are printed with control characters escaped."
)


def help_epilog() -> str:
    """The exit codes and the redaction promise, as every command's `--help` ends."""
    codes = "\n".join(
        textwrap.fill(meaning, 78, initial_indent=f"  {code.value}  ", subsequent_indent=" " * 5)
        for code, meaning in MEANINGS.items()
    )
    return f"exit codes:\n{codes}\n\n{textwrap.fill(REDACTION_PROMISE, 78)}"
