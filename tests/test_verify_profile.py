"""The verify profile: what a verify pass over n tokens costs in plain steps, measured once and cached."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from spec_helpers import run_plain

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.plain import GenerationRequest
from ds4spec.policy.profile import SPANS, VerifyProfile, cache_file, consistent, measure, profile_for

# Measured on a 2-core CPU with Qwen2.5-Coder-1.5B Q4_K_M (seconds per span length): linear, a jump at 8, a dip at 16.
CPU = VerifyProfile({1: 0.031, 2: 0.059, 4: 0.104, 8: 0.233, 12: 0.294, 16: 0.285, 32: 0.446, 64: 0.721}, "measured")


@pytest.fixture
def target(tiny_bpe_gguf: Path) -> Iterator[LlamaTarget]:
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=1024, n_gpu_layers=0)) as t:
        yield t


def test_a_plain_step_costs_one_and_measured_spans_cost_their_ratio() -> None:
    assert CPU.ratio(0) == 1.0
    assert CPU.ratio(15) == pytest.approx(0.285 / 0.031)
    assert CPU.ratio(15) < CPU.ratio(11)  # the dip at 16 is kept, not smoothed away


def test_unmeasured_spans_are_interpolated_and_extended_with_the_last_slope() -> None:
    assert CPU.ratio(2) == pytest.approx((0.059 + 0.104) / 2 / 0.031)  # span 3, between 2 and 4
    slope = (0.721 - 0.446) / 32
    assert CPU.ratio(79) == pytest.approx((0.721 + 16 * slope) / 0.031)


def test_best_case_gain_is_what_a_perfect_drafter_could_reach() -> None:
    assert CPU.best_case_gain(1) == pytest.approx(2 / (0.059 / 0.031))
    assert CPU.best_case_gain(63) > CPU.best_case_gain(7)
    assert CPU.best_case_gain(15, draft_cost=1.0) < 1  # a drafter as slow as the target can never pay


def test_the_prior_is_no_measurement() -> None:
    prior = VerifyProfile.prior()
    assert not prior.measured and CPU.measured
    assert prior.ratio(4) == pytest.approx(4.0)


def test_measuring_a_real_target_covers_the_spans_and_leaves_it_empty(target: LlamaTarget) -> None:
    profile = measure(target)
    assert profile.measured
    assert set(profile.spans) == {n for n in SPANS if n <= target.n_batch}
    assert all(seconds > 0 for seconds in profile.spans.values())
    assert target.n_past == 0


def test_measuring_does_not_change_what_the_target_writes_next(target: LlamaTarget) -> None:
    request = GenerationRequest(target.tokenizer.tokenize(b"def add(a, b):\n", add_special=True), 24)
    before = run_plain(target, request).tokens
    measure(target)
    assert run_plain(target, request).tokens == before


def test_the_profile_is_measured_once_then_read_from_the_cache(target: LlamaTarget) -> None:
    cache_file().unlink(missing_ok=True)
    first = profile_for(target)
    assert first.source == "measured"
    second = profile_for(target)
    assert second.source == "cached"
    assert second.spans == pytest.approx(first.spans)


def test_a_build_with_other_cpu_kernels_gets_its_own_profile(target: LlamaTarget,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """An AVX2-only build runs on an AVX-512 machine (DS4SPEC_CPU_FEATURES) and costs what its kernels cost."""
    from ds4spec.backend import runtime as llama_runtime
    from ds4spec.policy.profile import fingerprint

    native = fingerprint(target)
    monkeypatch.setattr(llama_runtime, "system_info", lambda: "CPU : AVX = 1 | AVX2 = 1 |")
    assert fingerprint(target) != native


def test_weights_read_or_mapped_and_huge_pages_or_not_get_their_own_profiles(target: LlamaTarget,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from ds4spec.policy.profile import fingerprint

    native = fingerprint(target)
    monkeypatch.setattr(target, "weights_read", not target.weights_read)
    read_otherwise = fingerprint(target)
    assert read_otherwise != native
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
    monkeypatch.setattr("ds4spec.backend.huge_pages.thp_mode", lambda: "never")
    never = fingerprint(target)
    monkeypatch.setattr("ds4spec.backend.huge_pages.thp_mode", lambda: "always")
    assert fingerprint(target) != never


@pytest.mark.parametrize("content", ["{not json", "[]", '{"KEY": {"1": "fast"}}', '{"KEY": {"1": 0}}'])
def test_a_damaged_cache_costs_only_a_new_measurement(target: LlamaTarget, content: str) -> None:
    from ds4spec.policy.profile import fingerprint

    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content.replace("KEY", fingerprint(target)), encoding="utf-8")
    assert profile_for(target, announce=False).source == "measured"
    assert fingerprint(target) in json.loads(path.read_text(encoding="utf-8"))


def test_a_curve_measured_while_something_else_ran_is_measured_again_and_not_kept() -> None:
    """Real curves dip a little (Q4_K_M at 16 tokens, Q8_0 on AVX2 at 4: 12%); a disturbed one dips far more."""
    assert consistent(CPU.spans)
    assert consistent({1: 0.0644, 2: 0.0895, 3: 0.1423, 4: 0.1256, 8: 0.2151})  # Q8_0, AVX2, field notes
    disturbed = {1: 0.0482, 2: 0.0837, 3: 0.1786, 4: 0.1437, 6: 0.4242, 8: 0.3080}  # F16, once cached as measured
    assert not consistent(disturbed)
    assert consistent({1: 0.00030, 2: 0.00041, 3: 0.00022})  # a tiny model's microseconds: noise, not a disturbance
    # The tiny model with AVX2-only kernels, every time: a pass over 64 tokens costs half of one over 48.
    assert consistent({1: 0.000103, 32: 0.00160, 48: 0.00256, 64: 0.00126})


def test_a_span_slow_in_every_attempt_is_timed_again_alone_until_its_real_cost_shows(
    target: LlamaTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the AVX2 machine the Q4_K_M target's pass over 12 tokens took 516 ms or 600 to 690 ms, about half the time
    each, so whole curves dipped by up to 29% at 16 tokens, three attempts could all be rejected, and the machine's
    curve was never cached. Here the 12-token pass stalls 30 ms in its first six passes (all three attempts)."""
    from ds4spec.policy import profile

    stalls = {"left": 2 * profile.ATTEMPTS}
    eval_span = target.eval_span

    def stalling(tokens: list[int]) -> object:
        if len(tokens) == 12 and stalls["left"]:
            stalls["left"] -= 1
            time.sleep(0.03)
        return eval_span(tokens)

    monkeypatch.setattr(target, "eval_span", stalling)
    spans = profile._timed(target, SPANS, profile.REPEATS, profile.ATTEMPTS)
    assert stalls["left"] == 0 and consistent(spans) and spans[12] < 0.03


def test_a_dip_names_the_spans_that_cost_more_than_a_longer_one() -> None:
    from ds4spec.policy.profile import dipped

    assert dipped({1: 0.070, 8: 0.463, 12: 0.612, 16: 0.473, 24: 0.828}) == [12]  # measured, AVX2
    assert dipped(CPU.spans) == []


def test_a_disturbed_cached_curve_is_measured_afresh(target: LlamaTarget) -> None:
    from ds4spec.policy.profile import fingerprint

    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({fingerprint(target): {"1": 0.05, "2": 0.2, "3": 0.1}}), encoding="utf-8")
    fresh = profile_for(target, announce=False)
    assert fresh.source == "measured" and fresh.spans[3] != 0.1


def test_an_unwritable_cache_still_gives_a_profile(target: LlamaTarget, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("DS4SPEC_HOME", str(blocker))
    assert profile_for(target, announce=False).source == "measured"


@pytest.mark.parametrize(("cached", "now", "holds"), [
    pytest.param({1: 0.0806, 2: 0.0908, 4: 0.1020, 8: 0.1470}, {1: 0.0579, 4: 0.1112}, False,
                 id="F16 curve from a day the plain step took 81 ms, timed on a day it takes 58"),
    pytest.param({1: 0.0233, 2: 0.0458, 4: 0.0764, 8: 0.1227}, {1: 0.0251, 4: 0.0899}, True,
                 id="Q4_K_M curve, timed again with ordinary noise"),
    pytest.param({1: 0.0150, 2: 0.0152, 4: 0.0155, 8: 0.0160}, {1: 0.0148, 4: 0.0190}, True,
                 id="a GPU's flat curve, a little noise"),
    pytest.param({1: 0.0150, 2: 0.0152, 4: 0.0155, 8: 0.0160}, {1: 0.0150, 4: 0.0450}, False,
                 id="a flat curve on a machine where 4 tokens cost 3 steps"),
    pytest.param({1: 0.00012, 2: 0.00014, 4: 0.00017}, {1: 0.00007, 4: 0.00030}, True,
                 id="a tiny model's microseconds: timer noise"),
])
def test_a_cached_curve_holds_while_a_short_span_costs_what_it_says(cached: dict[int, float],
                                                                    now: dict[int, float], holds: bool) -> None:
    from ds4spec.policy.profile import agrees

    assert agrees(cached, now) is holds


def test_a_cached_curve_is_timed_again_at_most_hourly(target: LlamaTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-shot completion pays the check once an hour; the check's verdict decides whether the curve stays."""
    from ds4spec.policy import profile

    cache_file().unlink(missing_ok=True)
    t0 = 1_000_000.0
    first = profile_for(target, announce=False, now=t0)
    timed: list[tuple[int, ...]] = []

    def timing(target: LlamaTarget, spans: tuple[int, ...], *args: object, **kwargs: object) -> dict[int, float]:
        timed.append(spans)
        return {1: 0.05, 4: 0.05 * first.ratio(3)}  # what the cached curve says: it holds

    monkeypatch.setattr(profile, "_timed", timing)
    assert profile_for(target, announce=False, now=t0 + 1800).source == "cached"
    assert timed == []
    assert profile_for(target, announce=False, now=t0 + 3700).source == "cached"
    assert timed == [(1, profile.CHECK_SPAN)]
    assert profile_for(target, announce=False, now=t0 + 3800).source == "cached"
    assert len(timed) == 1  # the check renewed the hour


@pytest.mark.parametrize(("stalled_passes", "kept"), [
    pytest.param(2, True, id="a stall in the first timing's 4-token passes: timed again, the curve holds"),
    pytest.param(10**6, False, id="4 tokens dear in every timing: the machine changed"),
])
def test_a_check_that_disagrees_is_timed_again_before_the_curve_is_dropped(
        target: LlamaTarget, monkeypatch: pytest.MonkeyPatch, stalled_passes: int, kept: bool) -> None:
    """A CI run on a busy machine measured the Q4_K_M curve and, a simulated hour later, had its one check disagree:
    the curve was measured again for nothing. A stall passes when the check is timed again; a real change stays.
    The passes' durations come from a clock that each pass advances: a plain step 50 ms, 4 tokens 110 ms (the
    cached curve's 2.2 steps) or, stalled, 500 ms."""
    from ds4spec.policy import profile

    cache_file().unlink(missing_ok=True)
    t0 = 1_000_000.0
    profile_for(target, announce=False, now=t0)
    monkeypatch.setattr(profile.VerifyProfile, "ratio", lambda self, k: 2.2)
    clock = {"now": 0.0, "stalls": stalled_passes, "four": 0}
    eval_span = target.eval_span

    def timed_pass(tokens: list[int]) -> object:
        if len(tokens) == profile.CHECK_SPAN:
            clock["four"] += 1
            clock["stalls"] -= 1
        clock["now"] += 0.05 if len(tokens) != profile.CHECK_SPAN else 0.5 if clock["stalls"] >= 0 else 0.11
        return eval_span(tokens)

    checked = []
    measure = profile.measure

    def measured_again(target: LlamaTarget) -> VerifyProfile:
        checked.append(clock["four"])
        return measure(target)

    monkeypatch.setattr(target, "eval_span", timed_pass)
    monkeypatch.setattr(profile, "time", SimpleNamespace(perf_counter=lambda: clock["now"]))
    monkeypatch.setattr(profile, "measure", measured_again)
    again = profile_for(target, announce=False, now=t0 + 3700)
    assert (again.source == "cached") is kept
    # Two timings (the stalled one, then one that holds), or all of them before the curve is measured again.
    timings = 2 if kept else profile.CHECK_ATTEMPTS
    assert (checked or [clock["four"]]) == [timings * profile.CHECK_REPEATS]
