"""The latency and fault-injecting proxy, under the test kit's name: it lives in
`blob_safetynet.embedded.proxy`, since the demo's recovery double (which ships) is built on it."""

from blob_safetynet.embedded.proxy import (
    INTERNAL_ERROR,
    SERVER_BUSY,
    Fault,
    LatencyProxy,
    request_kind,
    throttled,
)

__all__ = ["INTERNAL_ERROR", "SERVER_BUSY", "Fault", "LatencyProxy", "request_kind", "throttled"]
