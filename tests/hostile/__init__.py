"""The hostile-input corpus: every command, every output channel, one canary secret per case."""
