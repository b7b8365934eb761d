"""The documents table: its SQL over any SQLAlchemy URL, its dialects, its state changes.

May import the settings package and nothing else of the project (tests/test_boundaries.py).
"""
