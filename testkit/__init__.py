"""Test kit: local stand-ins and test support, never product code.

Azurite as a managed process (`azurite`), a fake ARM endpoint over local TLS (`arm_fake`, `tls`),
a latency and fault-injecting proxy in front of the blob endpoint (`fault_proxy`, from
`blob_safetynet.embedded.proxy`) and the recovery double (`recovery_double`, from
`blob_safetynet.embedded.recovery`), proxies that
answer as a misconfigured or non-conforming account would (`service_doubles`), the crash
harness and the invariants it checks (`crash`, `invariants`), and scratch PostgreSQL databases
and schemas (`scratch_db`). The tests, the benchmarks and the CLI's `demo` and embedded-Azurite
`verify` use it; the runtime packages (`sweeper`, `policies`, `infra`) never import it, and it
never ships in the function zip.
"""
