"""The recovery double, under the test kit's name: it lives in `blob_safetynet.embedded.recovery`,
since `safetynet demo` (which ships) runs the recovery story on it."""

from blob_safetynet.embedded.recovery import Kept, RecoveryDouble, RecoveryNets

__all__ = ["Kept", "RecoveryDouble", "RecoveryNets"]
