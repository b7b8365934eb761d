"""One module per subcommand. Each exposes `register(subparsers)`; its handler returns the exit code.

Handlers stay thin: parse and validate options, call into `sweeper/` or `policies/`, print.
"""
