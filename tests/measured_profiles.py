"""Verify profiles measured on this project's machines, shared by the policy tests that reason from them."""

from __future__ import annotations

from ds4spec.policy.profile import VerifyProfile

# The F32 pair on the AMD EPYC machine (runs 58 to 63): a pass over n tokens, in plain steps.
F32_PROFILE = VerifyProfile({1: 1.0, 2: 1.15, 3: 1.27, 4: 1.52, 6: 1.68, 8: 1.89, 16: 2.57, 64: 7.17}, "measured")
