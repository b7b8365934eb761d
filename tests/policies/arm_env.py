"""Point `safetynet audit` at a running fake ARM through the environment it reads."""

from __future__ import annotations

import pytest

from testkit.arm_fake import SUBSCRIPTION, TOKEN, FakeArm


def use_fake_arm(fake: FakeArm, patch: pytest.MonkeyPatch) -> None:
    """The token, CA bundle, subscription and endpoint of `fake`, set for this test."""
    patch.setenv("SAFETYNET_ARM_TOKEN", TOKEN)
    patch.setenv("REQUESTS_CA_BUNDLE", fake.ca_file)
    patch.setenv("AZURE_SUBSCRIPTION_ID", SUBSCRIPTION)
    patch.setenv("SAFETYNET_ARM_ENDPOINT", fake.endpoint)
