"""One limiter for every worker of an audit: ARM's and Resource Graph's throttling, honoured.

ARM answers 429 with `Retry-After` when a read budget is spent and reports what is left in
`x-ms-ratelimit-remaining-subscription-reads`
(https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling).
Resource Graph reports its per-user quota in `x-ms-user-quota-remaining` and
`x-ms-user-quota-resets-after` (hh:mm:ss), on every answer, a 429 included, and a client is to
wait for the reset before its next query
(https://learn.microsoft.com/azure/governance/resource-graph/concepts/guidance-for-throttled-requests).

A 429 closes a shared gate until its `Retry-After` (or, without one, Resource Graph's
`x-ms-user-quota-resets-after`) plus jitter has passed, so the other workers wait too instead of
each spending the budget on its own retries (no retry storm). There is one gate per budget:
ARM's read bucket belongs to a subscription (the request-limits page above: "per subscription",
and the buckets of different subscriptions are independent), so a request under
`/subscriptions/{id}` passes that subscription's gate and a 429 for one subscription does not
stop the workers reading another; Resource Graph's quota belongs to the user, so every query
passes the one `GRAPH_GATE`.

Every wait is honoured in full up to `MAX_RETRY_AFTER_S`. A longer one is not waited: the gate
refuses every request until the announced time has passed (nothing is sent inside the window),
and each refused read fails with `WaitBeyondBound`, whose message names the wait and the bound.
The number of attempts a request gets is bounded too (`MAX_ATTEMPTS`, connection and read
errors included). Every request sent is counted by gate (`sent_by_gate`).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from azure.core.pipeline.policies import RetryPolicy

from blob_safetynet.policies.rules.model import arm_fold
from blob_safetynet.policies.sources.connection import WaitBeyondBound

MAX_WAIT_S = 60.0
"""The longest backoff between two attempts that no service asked for (azure-core's
exponential backoff after a dropped connection or a 5xx)."""
MAX_RETRY_AFTER_S = 300.0
"""The longest wait a service may ask for (`Retry-After`, Resource Graph's quota reset) that the
audit honours; a longer one fails the reads of that gate until it has passed."""
MAX_ATTEMPTS = 6
JITTER = 0.2
"""Up to this fraction is added to each wait, so workers released together spread out."""
EMPTY_BUDGET_WAIT_S = 1.0
"""ARM refills a subscription's read bucket every second (the request-limits page above)."""
DEFAULT_RETRY_AFTER_S = 1.0
"""A 429 with neither `Retry-After` nor a quota reset still waits."""
GRAPH_GATE = "resource-graph"
TENANT_GATE = ""
"""ARM requests outside any subscription (the subscription list, management groups)."""
_SUBSCRIPTION = re.compile(r"^/subscriptions/([^/?]+)", re.IGNORECASE)


def gate_of(method: str, path: str) -> str:
    """The gate a request passes: Resource Graph's, its subscription's, or the tenant's."""
    if method.upper() == "POST" and "/microsoft.resourcegraph/" in arm_fold(path):
        return GRAPH_GATE
    named = _SUBSCRIPTION.match(path)
    return arm_fold(named.group(1)) if named else TENANT_GATE


def _seconds(text: str | None) -> float | None:
    """`Retry-After` in seconds (an integer; a date is treated as absent), or None."""
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def _duration(text: str | None) -> float | None:
    """`hh:mm:ss` as seconds, or None when it is not one."""
    if text is None:
        return None
    parts = text.strip().split(":")
    if len(parts) != 3:
        return None
    try:
        hours, minutes, seconds = (float(part) for part in parts)
    except ValueError:
        return None
    return hours * 3600 + minutes * 60 + seconds


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def asked_wait(status: int, headers: Mapping[str, str]) -> float | None:
    """How long an answer asks the caller to wait before the next request at its gate: a 429's
    `Retry-After`, else Resource Graph's quota reset; on any answer, the reset once the quota
    is spent, or a second once ARM's read budget is; None when it asks nothing."""
    resets = _duration(headers.get("x-ms-user-quota-resets-after"))
    if status == 429:
        retry_after = _seconds(headers.get("Retry-After"))
        if retry_after is not None:
            return retry_after
        return DEFAULT_RETRY_AFTER_S if resets is None else resets
    if _int(headers.get("x-ms-user-quota-remaining")) == 0:
        return EMPTY_BUDGET_WAIT_S if resets is None else resets
    if _int(headers.get("x-ms-ratelimit-remaining-subscription-reads")) == 0:
        return EMPTY_BUDGET_WAIT_S
    return None


class SharedThrottle:
    """The gate every request of one run passes; counts what throttling cost."""

    def __init__(
        self,
        *,
        max_wait_s: float = MAX_WAIT_S,
        max_retry_after_s: float = MAX_RETRY_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.max_wait_s = max_wait_s
        self.max_retry_after_s = max_retry_after_s
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._lock = threading.Lock()
        self._open_at: dict[str, float] = {}
        self._refused: dict[str, tuple[float, float]] = {}
        """Gate -> (when it opens again, the wait asked for) for waits beyond the bound."""
        self.throttled = 0
        """429 answers seen."""
        self.waits = 0
        self.waited_s = 0.0
        self.beyond_bound = 0
        """Waits asked for that were longer than `max_retry_after_s`."""
        self.sent_by_gate: Counter[str] = Counter()

    @property
    def sent(self) -> int:
        """HTTP requests sent through this throttle's clients, retries included."""
        with self._lock:
            return sum(self.sent_by_gate.values())

    def count_sent(self, method: str, path: str) -> None:
        gate = gate_of(method, urlsplit(path).path)
        with self._lock:
            self.sent_by_gate[gate] += 1

    def wait_turn(self, gate: str = TENANT_GATE) -> None:
        """Blocks while `gate` is closed; raises WaitBeyondBound while it refuses."""
        while True:
            with self._lock:
                now = self._clock()
                refused = self._refused.get(gate)
                delay = self._open_at.get(gate, 0.0) - now
            if refused is not None and refused[0] > now:
                raise WaitBeyondBound(
                    f"throttled: the service asked for a wait of {refused[1]:.0f} s, longer than "
                    f"the audit waits ({self.max_retry_after_s:.0f} s); not read"
                )
            if delay <= 0:
                return
            with self._lock:
                self.waits += 1
                self.waited_s += delay
            self._sleep(delay)

    def is_open(self, gate: str = TENANT_GATE) -> bool:
        """Whether a request at `gate` would go now."""
        with self._lock:
            now = self._clock()
            refused = self._refused.get(gate)
            return self._open_at.get(gate, 0.0) <= now and (refused is None or refused[0] <= now)

    def close_for(self, seconds: float, gate: str = TENANT_GATE) -> None:
        """Closes `gate` for `seconds` plus jitter unless it is closed longer; a wait beyond
        `max_retry_after_s` makes it refuse requests until then instead."""
        with self._lock:
            now = self._clock()
            if seconds > self.max_retry_after_s:
                self.beyond_bound += 1
                until = max(self._refused.get(gate, (0.0, 0.0))[0], now + seconds)
                self._refused[gate] = (until, seconds)
                return
            wait = seconds * (1 + JITTER * self._jitter())
            self._open_at[gate] = max(self._open_at.get(gate, 0.0), now + wait)

    def observe(self, status: int, headers: Mapping[str, str], gate: str = TENANT_GATE) -> None:
        """Reads one answer's throttling headers and closes `gate` as they say."""
        if status == 429:
            with self._lock:
                self.throttled += 1
        wait = asked_wait(status, headers)
        if wait is not None:
            self.close_for(wait, gate)

    def policy(
        self, max_attempts: int = MAX_ATTEMPTS, *, queries: bool = False
    ) -> ThrottledRetryPolicy:
        """A retry policy for one client (a policy belongs to one pipeline); with `queries`,
        its POSTs are reads (Resource Graph's queries) and retried like GETs."""
        retries = max_attempts - 1
        return ThrottledRetryPolicy(
            self,
            queries=queries,
            retry_total=retries,
            retry_status=retries,
            retry_connect=retries,
            retry_read=retries,
        )


class ThrottledRetryPolicy(RetryPolicy[Any, Any]):
    """azure-core's retries (connection and read errors, 408/429/5xx), with every wait, 429 or
    not, taken at the request's shared gate (`gate_of`) instead of in the worker alone.

    azure-core retries a POST only on 500, 503 and 504 and never after a connection or read
    error (its `retry_on_methods` leaves POST out); a Resource Graph query is a read, so a
    client made with `queries` retries its POSTs as it retries GETs."""

    def __init__(self, throttle: SharedThrottle, *, queries: bool = False, **kwargs: Any) -> None:
        super().__init__(retry_backoff_max=throttle.max_wait_s, **kwargs)
        self._throttle = throttle
        self._queries = queries
        self._current = threading.local()
        """The gate of the request this thread is sending (a connection error has no response
        to name it)."""

    def configure_retries(self, options: dict[str, Any]) -> dict[str, Any]:
        settings = super().configure_retries(options)
        if self._queries:
            settings["methods"] = frozenset(settings["methods"]) | {"POST"}
        return settings

    def send(self, request: Any) -> Any:
        gate = _gate(request)
        self._current.gate = gate
        self._throttle.wait_turn(gate)
        response = super().send(request)
        # The last answer (a 429 whose retries ran out included) was not slept on: its wait
        # still holds the gate for the other workers.
        self._throttle.observe(
            response.http_response.status_code, response.http_response.headers, gate
        )
        return response

    def sleep(self, settings: dict[str, Any], transport: Any, response: Any = None) -> None:
        gate = getattr(self._current, "gate", TENANT_GATE) if response is None else _gate(response)
        if response is not None and response.http_response.status_code == 429:
            self._throttle.observe(429, response.http_response.headers, gate)
        else:
            backoff = self.get_backoff_time(settings)
            if backoff > 0:
                self._throttle.close_for(min(backoff, self._throttle.max_wait_s), gate)
        self._throttle.wait_turn(gate)


def _gate(pipeline_object: Any) -> str:
    """The gate of a pipeline request or response's HTTP request."""
    http = pipeline_object.http_request
    return gate_of(http.method, urlsplit(http.url).path)
