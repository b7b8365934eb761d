"""What every command shares: usage errors, the JSON error object, logging, option types."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from blob_safetynet.cli.exitcodes import ExitCode, help_epilog
from blob_safetynet.settings import appsettings, untrusted
from blob_safetynet.settings.redaction import RedactingFilter, Redactor, printable, secrets_in

SECRET_ENV = appsettings.SECRET_NAMES
MAX_LISTED_ERRORS = 20
"""Errors listed one by one in a report; the rest are counted (2,344 errors made a 239 KB line)."""


class CommandError(Exception):
    """A command cannot go on: the exit code and a message already safe to print."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class UsageError(CommandError):
    def __init__(self, message: str) -> None:
        super().__init__(ExitCode.USAGE, message)


class Parser(argparse.ArgumentParser):
    """argparse whose errors are raised (so `main` can scrub them and print JSON), not exited."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", help_epilog())
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:
        raise UsageError(f"{printable(message)}\n{self.format_usage().rstrip()}")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: None = None
    ) -> argparse.Namespace:
        words = list(sys.argv[1:] if args is None else args)
        # argparse (3.11) drops a '--' value (`--output=--`, `--output --`) and leaves a list
        # where a string belongs; no command takes positional arguments, so '--' has no use.
        if any(word == "--" or word.endswith("=--") for word in words):
            self.error("'--' is not a value any option takes")
        return super().parse_args(words, namespace)


def redactor_for(argv: Sequence[str], env: Mapping[str, str]) -> Redactor:
    """Knows the secrets in the command line and in the secret-bearing variables."""
    redactor = Redactor(secrets_in(argv))
    redactor.add(*secrets_in(env.get(name) for name in SECRET_ENV))
    # Tokens are secret whole, whatever they look like.
    redactor.add(env.get(appsettings.ARM_TOKEN.name), env.get(appsettings.AZURE_CLIENT_SECRET.name))
    return redactor


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (also when it fails to parse)."""
    pairs = zip(argv, [*argv[1:], ""], strict=True)
    return "--json" in argv or any(
        a == "--format=json" or (a == "--format" and b == "json") for a, b in pairs
    )


def error_object(code: ExitCode, message: str, **extra: Any) -> str:
    """The JSON a `--json` run prints when it cannot produce its report."""
    body = {"exit_code": int(code), "kind": code.name.lower(), "message": message, **extra}
    return json.dumps({"error": body})


def fail(command: str, code: ExitCode, message: str, as_json: bool, **extra: Any) -> int:
    """Report a failure on stderr (and as JSON on stdout when asked); returns the exit code."""
    print(f"safetynet {command}: {printable(message, backslashes=False)}", file=sys.stderr)
    if as_json:
        print(error_object(code, message, **extra))
    return int(code)


def summarised(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep report's fields as every output shows them: `errors` and `warnings` capped,
    with `error_count` and `warning_count` beside them."""
    shown = dict(fields)
    for key, count in (("errors", "error_count"), ("warnings", "warning_count")):
        items = shown.get(key)
        if isinstance(items, list):
            shown[key], shown[count] = capped(items), len(items)
    return shown


def capped(errors: Sequence[str]) -> list[str]:
    """At most MAX_LISTED_ERRORS errors, escaped; the caller reports the total beside it."""
    return [printable(error) for error in errors[:MAX_LISTED_ERRORS]]


def ascii_int(text: str) -> int:
    """A whole number in ASCII digits; int() would also take '٤', '1_0' and ' 4 '."""
    if not (text.isascii() and text.lstrip("-").isdigit()) or len(text) > 12:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a whole number"
        )  # escaped by Parser.error
    return int(text)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line, the shape log collectors ingest without parsing rules."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        sweep = getattr(record, "sweep", None)
        if isinstance(sweep, dict):
            entry["sweep"] = summarised(sweep)
        return json.dumps(entry)


CREDENTIAL_LINE_LIMIT = 300
"""Longer azure-identity warnings are cut to their first line and the credentials tried."""


class ShortCredentialChain(logging.Filter):
    """azure-identity logs a failed credential chain as one WARNING of several KB (each
    credential's whole reason, with links); the command reports the failure itself, so the
    record keeps its first line and the names of the credentials it tried."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("azure.identity") or record.levelno < logging.WARNING:
            return True
        message = record.getMessage()
        if len(message) <= CREDENTIAL_LINE_LIMIT:
            return True
        first, *rest = message.splitlines() or [""]
        tried = [
            line.strip().split(":", 1)[0]
            for line in rest
            if line[:1] in ("\t", " ") and ":" in line and line.strip()[:1].isalpha()
        ]
        shown = first[:CREDENTIAL_LINE_LIMIT]
        record.msg = f"{shown} Tried: {', '.join(tried)}." if tried else shown
        record.args = None
        return True


CLI_HANDLER = "safetynet-cli"
"""The name of the handler `install_logging` adds (`--log-format`, `-q` and `-v` adjust it)."""


def install_logging(redactor: Redactor) -> logging.Handler:
    """Every log record (ours and the Azure SDK's) to stderr, scrubbed; JSON lines off a tty."""
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(CLI_HANDLER)
    if not sys.stderr.isatty():
        handler.setFormatter(JsonLogFormatter())
    handler.addFilter(ShortCredentialChain())
    handler.addFilter(RedactingFilter(redactor))
    logging.getLogger().addHandler(handler)
    return handler


def log_progress() -> None:
    """Commands that run long report their progress as INFO records when not on a terminal
    (`-v` asks for them on one too; `-q` drops them at the handler)."""
    logger = logging.getLogger("safetynet")
    if not sys.stderr.isatty() and logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)


def parse_flag(value: str, option: str) -> bool:
    """A store_const flag whose default came from a true|false environment variable."""
    try:
        return appsettings.parse_bool(value, name=option)
    except appsettings.SettingsError as error:
        raise UsageError(str(error)) from None


def one_stdin(options: Mapping[str, object]) -> None:
    """UsageError when more than one file option (or one option twice) names `-`: standard
    input can be read once. `options` maps each option to its value or list of values."""
    readers = [
        option
        for option, value in options.items()
        for item in (value if isinstance(value, list | tuple) else [value])
        if item is not None and str(item) == untrusted.STDIN
    ]
    if len(readers) > 1:
        raise UsageError(
            f"standard input (-) can be read once; it is named by {', '.join(readers)}"
        )
