"""`make bench`: each module here measures one comparison, baseline and candidate in the same run.

A benchmark module exposes `run() -> str` returning a Markdown section; `python -m benchmarks`
writes the sections into docs/benchmarks.md between `<!-- bench:NAME -->` markers.
"""
