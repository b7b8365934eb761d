"""Continuous verification: the probes and the audit on a schedule, and its history."""
