"""What the embedded demo, `safetynet local` and `verify` run at run time: the Azurite
launcher, the crash harness and the invariant checker (the test doubles stay in the
repository's testkit/, outside the wheel)."""
