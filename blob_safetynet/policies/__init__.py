"""Policy as code: one rule set before deploy (CrossGuard), after deploy (audit), in every format."""
