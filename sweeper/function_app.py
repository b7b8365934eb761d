"""The Azure Function's entry (Python v2 programming model): its two timers, bound to the
functions of `blob_safetynet.function` that do the work.

The build step (`blob_safetynet/infra/function_zip.py`) puts this file at the root of the
deployment zip, where the Functions host indexes the module-level `app`. Everything else happens
per invocation: nothing here touches the network at import time, so a wrong setting fails the
invocation (and names the setting) instead of failing the host's indexing with no useful message.

App settings are documented in docs/function.md. Logs go through `logging`; the host forwards
them to Application Insights as traces.

The host imports this file to index the timers (the cold start) and invokes one later, so the
work's modules (SQLAlchemy, the Blob SDK, the verifier) are imported by the first invocation
that needs them, not here: indexing loads `azure.functions` and the settings' names only
(tests/sweeper/test_function_app.py holds the entry to that). `sweep_once` and `verify_once`
stay importable from here, loaded on first access.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Final

import azure.functions as func

from blob_safetynet.settings import appsettings

if TYPE_CHECKING:  # loaded by `__getattr__` on first access, not by the host's indexing
    from blob_safetynet.function.sweep import sweep_once
    from blob_safetynet.function.verify import verify_once

__all__ = ["app", "sweep_once", "sweep_timer", "verify_once", "verify_timer"]

FUNCTION_NAME: Final = "sweep_timer"
SCHEDULE_SETTING: Final = appsettings.SCHEDULE.name
VERIFY_FUNCTION_NAME: Final = "verify_timer"
VERIFY_SCHEDULE_SETTING: Final = appsettings.VERIFY_SCHEDULE.name

log = logging.getLogger("safetynet.function")

app = func.FunctionApp()


def __getattr__(name: str) -> Any:
    """`function_app.sweep_once` and `verify_once`: the work's functions, imported on first use."""
    if name == "sweep_once":
        from blob_safetynet.function.sweep import sweep_once

        return sweep_once
    if name == "verify_once":
        from blob_safetynet.function.verify import verify_once

        return verify_once
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _let_info_through() -> None:
    from blob_safetynet.function.invocation import let_info_through

    let_info_through()


@app.timer_trigger(
    # The host resolves %NAME% from the app settings, so the schedule changes without a deploy.
    schedule=f"%{SCHEDULE_SETTING}%",
    arg_name="timer",
    run_on_startup=False,
    use_monitor=True,
)
def sweep_timer(timer: func.TimerRequest) -> None:
    """Timer entry: the app settings are the process environment on Azure Functions."""
    from blob_safetynet.function.sweep import sweep_once

    _let_info_through()
    if timer.past_due:
        log.warning("sweep timer is past due; sweeping now")
    sweep_once(os.environ)


@app.timer_trigger(
    schedule=f"%{VERIFY_SCHEDULE_SETTING}%",
    arg_name="timer",
    run_on_startup=False,
    use_monitor=True,
)
def verify_timer(timer: func.TimerRequest) -> None:
    """Continuous verification: the probes and the settings audit, on their own schedule."""
    from blob_safetynet.function.verify import verify_once

    _let_info_through()
    verify_once(os.environ)
