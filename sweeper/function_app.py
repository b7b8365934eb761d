"""The Azure Function's entry (Python v2 programming model): its two timers, bound to the
functions of `blob_safetynet.function` that do the work.

The build step (`blob_safetynet/infra/function_zip.py`) puts this file at the root of the
deployment zip, where the Functions host indexes the module-level `app`. Everything else happens
per invocation: nothing here touches the network at import time, so a wrong setting fails the
invocation (and names the setting) instead of failing the host's indexing with no useful message.

App settings are documented in docs/function.md. Logs go through `logging`; the host forwards
them to Application Insights as traces.
"""

from __future__ import annotations

import logging
import os
from typing import Final

import azure.functions as func

from blob_safetynet.function.invocation import let_info_through
from blob_safetynet.function.sweep import sweep_once
from blob_safetynet.function.verify import verify_once
from blob_safetynet.settings import appsettings

__all__ = ["app", "sweep_once", "sweep_timer", "verify_once", "verify_timer"]

FUNCTION_NAME: Final = "sweep_timer"
SCHEDULE_SETTING: Final = appsettings.SCHEDULE.name
VERIFY_FUNCTION_NAME: Final = "verify_timer"
VERIFY_SCHEDULE_SETTING: Final = appsettings.VERIFY_SCHEDULE.name

log = logging.getLogger("safetynet.function")

app = func.FunctionApp()


@app.timer_trigger(
    # The host resolves %NAME% from the app settings, so the schedule changes without a deploy.
    schedule=f"%{SCHEDULE_SETTING}%",
    arg_name="timer",
    run_on_startup=False,
    use_monitor=True,
)
def sweep_timer(timer: func.TimerRequest) -> None:
    """Timer entry: the app settings are the process environment on Azure Functions."""
    let_info_through()
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
    let_info_through()
    verify_once(os.environ)
