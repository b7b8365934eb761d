"""Reconcile: the container against the table, from a listing or from Blob Inventory, with
guarded plans; and adopt, which brings an existing table and container under the protocol.

Runs beside the sweeper and takes its lease and binding: may import the sweeper, protocol, store
and settings packages (tests/test_boundaries.py).
"""
