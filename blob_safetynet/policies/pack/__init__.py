"""The CrossGuard policy pack built from the rules, and its config file."""
