"""Test doubles shared by the tests and the benchmark (kept in the package so `benchmarks/`
need not import from `tests/`)."""
