"""The upload protocol an application uses: content records, blob writes under conditions, and
the blob clients built once per process.

May import the store and the settings packages (tests/test_boundaries.py).
"""
