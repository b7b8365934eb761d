"""The `safetynet` command line, the local Azurite stack and the constants every part shares."""
