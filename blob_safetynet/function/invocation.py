"""What every invocation of the Function shares: its secret settings' values scrubbed from
whatever it logs or raises, and the logger level the worker needs to forward INFO.

The host sends both logs and errors to Application Insights, where anyone with read access to
the traces would see them (docs/function.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Final, TypeVar

from blob_safetynet.settings import appsettings
from blob_safetynet.settings.redaction import RedactingFilter, Redactor, printable, secrets_in

SECRET_SETTINGS: Final = tuple(
    setting.name for setting in appsettings.FUNCTION_SETTINGS if setting.secret
)
"""Settings whose values hold secrets (passwords, SAS, keys): scrubbed from every log record."""

T = TypeVar("T")


class SweepFailedError(RuntimeError):
    """Some stale rows could not be swept; raised so the platform records a failed invocation."""


def let_info_through() -> None:
    """The worker forwards INFO and above, but only if our logger lets the record through."""
    logger = logging.getLogger("safetynet")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def scrubbing(env: Mapping[str, str], work: Callable[[], T]) -> T:
    """`work()` with every log record and any error it raises scrubbed of the secret settings'
    values in `env`."""
    redactor = Redactor(secrets_in(env.get(name) for name in SECRET_SETTINGS))
    with _scrubbed_logs(redactor):
        try:
            return work()
        except Exception as error:
            if all(redactor.scrub(text) == text for text in _messages(error)):
                raise  # nothing to hide: the host records the error as it is
            raise _scrubbed(error, redactor) from None


def _messages(error: BaseException) -> list[str]:
    """The message of `error` and of every exception chained to it (the host prints them all)."""
    texts: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(texts) < 20:
        texts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return texts


def _scrubbed(error: Exception, redactor: Redactor) -> Exception:
    """The same kind of error with a scrubbed message and no chained cause."""
    message = printable(redactor.scrub(str(error)), backslashes=False)
    try:
        return type(error)(message)
    except Exception:  # an error type that does not take one message
        return SweepFailedError(f"{type(error).__name__}: {message}")


@contextmanager
def _scrubbed_logs(redactor: Redactor) -> Iterator[None]:
    """Every handler of the host (and of a test) scrubs the records of this invocation."""
    scrub = RedactingFilter(redactor)
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(scrub)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(scrub)
