"""The sweeper: abandoned uploads removed under a tag guard (`sweep`), the lease for databases
without SKIP LOCKED (`lease`), the heartbeat `verify` reads (`heartbeat`) and the container's
binding to its database (`binding`).

May import the protocol, store and settings packages (tests/test_boundaries.py).
"""
