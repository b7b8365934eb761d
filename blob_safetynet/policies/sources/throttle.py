"""One limiter for every worker of an audit: ARM's and Resource Graph's throttling, honoured.

ARM answers 429 with `Retry-After` when a read budget is spent and reports what is left in
`x-ms-ratelimit-remaining-subscription-reads`
(https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling).
Resource Graph reports its per-user quota in `x-ms-user-quota-remaining` and
`x-ms-user-quota-resets-after` (hh:mm:ss)
(https://learn.microsoft.com/azure/governance/resource-graph/concepts/guidance-for-throttled-requests).

A 429 closes a shared gate until its `Retry-After` (plus jitter) has passed, so the other
workers wait too instead of each spending the budget on its own retries (no retry storm).
There is one gate per budget: ARM's read bucket belongs to a subscription (the request-limits
page above: "per subscription", and the buckets of different subscriptions are independent), so
a request under `/subscriptions/{id}` passes that subscription's gate and a 429 for one
subscription does not stop the workers reading another; Resource Graph's quota belongs to the
user, so every query passes the one `GRAPH_GATE`. Every wait is bounded, and so is the number
of attempts a request gets.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from azure.core.pipeline.policies import RetryPolicy

MAX_WAIT_S = 60.0
MAX_ATTEMPTS = 6
JITTER = 0.2
"""Up to this fraction is added to each wait, so workers released together spread out."""
EMPTY_BUDGET_WAIT_S = 1.0
"""ARM refills a subscription's read bucket every second (the request-limits page above)."""
DEFAULT_RETRY_AFTER_S = 1.0
"""A 429 whose `Retry-After` is missing or unreadable still waits."""
GRAPH_GATE = "resource-graph"
TENANT_GATE = ""
"""ARM requests outside any subscription (the subscription list, management groups)."""
_SUBSCRIPTION = re.compile(r"^/subscriptions/([^/?]+)", re.IGNORECASE)


def gate_of(method: str, path: str) -> str:
    """The gate a request passes: Resource Graph's, its subscription's, or the tenant's."""
    if method.upper() == "POST" and "/microsoft.resourcegraph/" in path.lower():
        return GRAPH_GATE
    named = _SUBSCRIPTION.match(path)
    return named.group(1).lower() if named else TENANT_GATE


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


class SharedThrottle:
    """The gate every request of one run passes; counts what throttling cost."""

    def __init__(
        self,
        *,
        max_wait_s: float = MAX_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.max_wait_s = max_wait_s
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._lock = threading.Lock()
        self._open_at: dict[str, float] = {}
        self.throttled = 0
        """429 answers seen."""
        self.waits = 0
        self.waited_s = 0.0

    def wait_turn(self, gate: str = TENANT_GATE) -> None:
        """Blocks while `gate` is closed."""
        while True:
            with self._lock:
                delay = self._open_at.get(gate, 0.0) - self._clock()
            if delay <= 0:
                return
            with self._lock:
                self.waits += 1
                self.waited_s += delay
            self._sleep(delay)

    def is_open(self, gate: str = TENANT_GATE) -> bool:
        """Whether a request at `gate` would go now."""
        with self._lock:
            return self._open_at.get(gate, 0.0) <= self._clock()

    def close_for(self, seconds: float, gate: str = TENANT_GATE) -> None:
        """Closes `gate` for `seconds` (bounded, plus jitter) unless it is closed longer."""
        wait = min(seconds, self.max_wait_s) * (1 + JITTER * self._jitter())
        with self._lock:
            self._open_at[gate] = max(self._open_at.get(gate, 0.0), self._clock() + wait)

    def observe(self, status: int, headers: Mapping[str, str], gate: str = TENANT_GATE) -> None:
        """Reads one answer's throttling headers and closes `gate` as they say."""
        if status == 429:
            with self._lock:
                self.throttled += 1
            retry_after = _seconds(headers.get("Retry-After"))
            self.close_for(DEFAULT_RETRY_AFTER_S if retry_after is None else retry_after, gate)
            return
        if _int(headers.get("x-ms-user-quota-remaining")) == 0:
            resets = _duration(headers.get("x-ms-user-quota-resets-after"))
            self.close_for(EMPTY_BUDGET_WAIT_S if resets is None else resets, gate)
        if _int(headers.get("x-ms-ratelimit-remaining-subscription-reads")) == 0:
            self.close_for(EMPTY_BUDGET_WAIT_S, gate)

    def policy(self, max_attempts: int = MAX_ATTEMPTS) -> ThrottledRetryPolicy:
        """A retry policy for one client (a policy belongs to one pipeline)."""
        return ThrottledRetryPolicy(
            self, retry_total=max_attempts - 1, retry_status=max_attempts - 1
        )


class ThrottledRetryPolicy(RetryPolicy[Any, Any]):
    """azure-core's retries (connection errors, 5xx on reads), with every wait, 429 or not,
    taken at the request's shared gate (`gate_of`) instead of in the worker alone."""

    def __init__(self, throttle: SharedThrottle, **kwargs: Any) -> None:
        super().__init__(retry_backoff_max=throttle.max_wait_s, **kwargs)
        self._throttle = throttle

    def send(self, request: Any) -> Any:
        gate = _gate(request)
        self._throttle.wait_turn(gate)
        response = super().send(request)
        if response.http_response.status_code != 429:
            self._throttle.observe(
                response.http_response.status_code, response.http_response.headers, gate
            )
        return response

    def sleep(self, settings: dict[str, Any], transport: Any, response: Any = None) -> None:
        gate = TENANT_GATE if response is None else _gate(response)
        if response is not None and response.http_response.status_code == 429:
            self._throttle.observe(429, response.http_response.headers, gate)
        else:
            backoff = self.get_backoff_time(settings)
            if backoff > 0:
                self._throttle.close_for(backoff, gate)
        self._throttle.wait_turn(gate)


def _gate(pipeline_object: Any) -> str:
    """The gate of a pipeline request or response's HTTP request."""
    http = pipeline_object.http_request
    return gate_of(http.method, urlsplit(http.url).path)
