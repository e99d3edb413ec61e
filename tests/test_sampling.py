"""The target's sampler: greedy, filters, seeded determinism, and the distribution it samples from."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from ds4spec.core.sampling import Sampler, SamplingSettings

LOGITS = np.array([2.0, 1.5, 1.0, 0.5, 0.0, -1.0, -3.0, -8.0], dtype=np.float32)


def test_greedy_picks_the_argmax_and_draws_no_randomness() -> None:
    s = Sampler(SamplingSettings(temperature=0.0, seed=1))
    state = s._rng.bit_generator.state
    assert s.choose(LOGITS) == 0
    assert s._rng.bit_generator.state == state


def test_greedy_ties_resolve_to_the_lowest_id() -> None:
    assert Sampler(SamplingSettings()).choose(np.array([1.0, 3.0, 3.0], dtype=np.float32)) == 1


def test_same_seed_gives_the_same_tokens() -> None:
    settings = SamplingSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=42)
    s1, s2 = Sampler(settings), Sampler(settings)
    first = [s1.choose(LOGITS) for _ in range(200)]
    assert first == [s2.choose(LOGITS) for _ in range(200)]
    assert len(set(first)) > 2  # it really samples


def test_each_sample_consumes_exactly_one_uniform_whatever_the_filters() -> None:
    """Speculative verification relies on this: the random stream must not depend on the candidates."""
    for settings in (
        SamplingSettings(temperature=0.7, top_k=2, seed=5),
        SamplingSettings(temperature=1.3, top_k=0, top_p=0.5, min_p=0.0, seed=5),
    ):
        s = Sampler(settings)
        reference = np.random.default_rng(5)
        for _ in range(10):
            s.choose(LOGITS)
            reference.random()
        assert s._rng.random() == reference.random()


def test_top_k_keeps_only_the_k_likeliest() -> None:
    dist = Sampler(SamplingSettings(temperature=1.0, top_k=3, top_p=1.0, min_p=0.0)).distribution(LOGITS)
    assert set(dist) == {0, 1, 2}


def test_top_p_keeps_the_smallest_set_reaching_p() -> None:
    probs = np.exp(LOGITS - LOGITS.max())
    probs /= probs.sum()
    dist = Sampler(SamplingSettings(temperature=1.0, top_k=0, top_p=0.6, min_p=0.0)).distribution(LOGITS)
    k = int(np.searchsorted(np.cumsum(probs), 0.6)) + 1
    assert set(dist) == set(range(k))


def test_min_p_drops_tokens_far_below_the_likeliest() -> None:
    dist = Sampler(SamplingSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.3)).distribution(LOGITS)
    probs = np.exp(LOGITS - LOGITS.max())
    assert set(dist) == {i for i, p in enumerate(probs) if p >= 0.3}


def test_repeat_penalty_lowers_recent_tokens() -> None:
    s = Sampler(SamplingSettings(repeat_penalty=10.0))
    assert s.choose(LOGITS, history=[0]) == 1
    assert Sampler(SamplingSettings()).choose(LOGITS, history=[0]) == 0


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="top-p"):
        Sampler(SamplingSettings(top_p=0.0))
    with pytest.raises(ValueError, match="temperature"):
        Sampler(SamplingSettings(temperature=-1))


def test_samples_follow_the_tempered_softmax() -> None:
    """Chi-square goodness of fit, fixed seed: sampled frequencies match softmax(logits / T)."""
    settings = SamplingSettings(temperature=0.8, top_k=0, top_p=1.0, min_p=0.0, seed=1234)
    s = Sampler(settings)
    n = 20_000
    counts = np.bincount([s.choose(LOGITS) for _ in range(n)], minlength=len(LOGITS))
    p = np.exp((LOGITS.astype(np.float64) - LOGITS.max()) / 0.8)
    p /= p.sum()
    # Chi-square needs expected counts of about 5 or more: pool the unlikely tokens into the last bucket.
    keep = int(np.count_nonzero(p * n >= 5))
    observed = np.append(counts[: keep - 1], counts[keep - 1 :].sum()).astype(np.float64)
    expected = np.append(p[: keep - 1], p[keep - 1 :].sum()) * n
    assert scipy_stats.chisquare(observed, expected).pvalue > 1e-3
