"""The settings vocabulary every part shares: the bottom layer.

`appsettings` names every app setting and environment variable with its grammar (standard
library only); `parsed` checks them into the settings a sweep and the Function run with (it reads
database URLs with SQLAlchemy's parser). Beside them the names of the protocol (`vocabulary`),
the one redaction path, the one endpoint parser, the one reader of outside JSON (`untrusted`),
the one way a file is written (`atomicfile`) and the telemetry's names (`signals`). Imports
nothing of the project outside this package (tests/test_boundaries.py).
"""
