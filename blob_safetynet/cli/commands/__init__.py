"""One module per subcommand. Each exposes `register(subparsers)`; its handler returns the exit code.

Handlers stay thin: parse and validate options, call into `blob_safetynet/sweeper/` or `blob_safetynet/policies/`, print.
"""
