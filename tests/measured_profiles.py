"""Verify profiles measured on this project's machines, shared by the policy tests that reason from them."""

from __future__ import annotations

from ds4spec.policy.profile import VerifyProfile

# The F32 pair on the AMD EPYC machine (runs 58 to 63): a pass over n tokens, in plain steps.
F32_PROFILE = VerifyProfile({1: 1.0, 2: 1.15, 3: 1.27, 4: 1.52, 6: 1.68, 8: 1.89, 16: 2.57, 64: 7.17}, "measured")
# The default pair (Q4_K_M) on the same machine (run 63): compute-bound, a pass over 2 tokens costs 1.7 plain steps.
Q4_AVX512_PROFILE = VerifyProfile({1: 1.0, 2: 1.73, 3: 2.21, 4: 2.46, 6: 3.59, 8: 5.24, 12: 6.71, 16: 6.23, 24: 9.38,
                                   32: 10.41, 48: 14.52, 64: 18.60}, "measured")
