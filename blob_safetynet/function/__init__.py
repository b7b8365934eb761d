"""The Azure Function's work, one module a timer: `sweep` (the sweeper on the documents table)
and `verify` (continuous verification: the probes and the settings audit), and what every
invocation shares (`invocation`: secrets scrubbed from logs and errors).

The entry file the host indexes, sweeper/function_app.py, only binds the timers to these
functions. The one package that takes both the sweeper and the policies: it sits above the
runtime parts and below the embedded kit (tests/test_boundaries.py).
"""
