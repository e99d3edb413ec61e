"""What a verify pass over n tokens costs on this machine, relative to one plain decoding step.

Why: the gate and the triggers choose a draft length by ``E(k) / cost(k)``, and a guess at ``cost(k)`` is
badly wrong on a CPU. Measured on the project's 2-core machines with Qwen2.5-Coder-1.5B Q4_K_M, a span of
n tokens costs 1.8, 3.4, 7.5, 8.8, 15 and 26.5 plain steps for n = 2, 4, 8, 16, 32 and 64: nearly linear
up to 7 tokens, a jump at 8, and a dip at 16 (the batched kernels work in blocks). So the curve is measured
once per model and machine, on the real target, and kept in ``<data dir>/verify-costs.json``, checked at load
(at most hourly) by timing one short span again (``agrees``: a machine of the same CPU model on another day may
not be the same machine); a policy then scales it by the plain step it measures online. A GPU's curve is flat,
and the same code drafts far.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import sys
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ds4spec.paths import data_dir

if TYPE_CHECKING:
    from ds4spec.backend.target import LlamaTarget

SPANS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # span lengths measured: a pending token + up to 63 drafted
PREFIX_TOKENS = 64  # context the spans are measured after (attention over an empty context is too cheap)
REPEATS = 2  # the faster of two runs: a scheduler stall must not enter the curve
# A longer span never costs much less than a shorter one (the largest dip measured, Q8_0 on AVX2 at 4 tokens, is 12%).
# A curve that dips more was measured while something else ran (an F16 curve cached so had a pass over 2 tokens at 2.7
# steps and over 3 at 1.6; measured idle: 1.65 and 1.77): it is measured again, and never cached.
MAX_DIP = 0.15
# A dip of less than this is no sign of a disturbance (which costs a real model's passes tens of milliseconds): the
# tests' tiny model passes over 48 tokens in 2.6 ms and over 64 in 1.3 ms, every time, with AVX2-only kernels.
DIP_FLOOR_S = 0.005
TIMER_FLOOR_S = 0.001  # below a millisecond (a tiny model's plain step), a pass's cost is timer noise
ATTEMPTS = 3
# On the AVX2 machine the Q4_K_M target's pass over 12 tokens took 516 ms or 600 to 690 ms, about half the time each
# (the fastest of two: 516 to 690 ms in eight curves, against 465 to 619 for 16 tokens), so whole curves dipped by up
# to 29% at 16 and three attempts could all be rejected (a real-tier test failed so). The spans that make a curve dip
# are then timed again alone, up to this many times each: a stall passes, a span's real cost stays.
RETIMES = 8
# The first plain steps after a model loads run slow (the F16 target: 88, 69, 66, 63, then 58 ms): timed among the
# spans, they made every ratio low and long drafts look cheap.
WARM_STEPS = 6
# A cached curve is checked at load (at most hourly) against a pass over CHECK_SPAN tokens (with span 1, the faster of
# CHECK_REPEATS, after WARM_STEPS): the same CPU model and build is not always the same machine. On this project's VM
# the F16 target's plain step took 58 ms in one minute and 72 in another (memory bandwidth shared on the host) while
# passes over several tokens kept their cost; an F16 curve cached once (its plain step 81 ms, likely timed cold) had a
# pass over 4 tokens at 1.27 plain steps, timed later at 1.92, and the F16 benches drafted along it.
CHECK_SPAN = 4
CHECK_REPEATS = 2
# A check that disagrees is timed again (the fastest of each span kept) up to this many times in all before the curve
# is measured anew: a CI run on a busy machine had one check of a curve measured a minute before disagree, while a real
# change of machine keeps disagreeing.
CHECK_ATTEMPTS = 3
CHECK_EVERY_S = 3600.0  # a one-shot `ds4spec complete` pays the check once an hour, not each call
CHECK_PREFIX = 16  # a short read before: the ratio at 4 tokens hardly depends on it
DRIFT_STEPS = 0.3  # cost beyond a plain step, in plain steps: a difference this small is noise
DRIFT_FACTOR = 1.5
# Without a measured curve (the profile's prior, and the gate's guess for a length it has not measured): each drafted
# token adds this many plain steps. The measured CPU slope is 0.6 to 1.0; too low a guess makes the first drafts
# cost more than they return, and a GPU's measured profile corrects it.
PRIOR_COST_PER_DRAFTED_TOKEN = 0.75


@dataclass(frozen=True, slots=True)
class VerifyProfile:
    """``ratio(k)``: the cost of a verify pass over a pending token and k drafted ones, in plain steps."""

    spans: Mapping[int, float]  # span length n -> seconds (or any unit: only ratios to n = 1 are used)
    source: str = "prior"  # "measured", "cached" or "prior"

    @property
    def measured(self) -> bool:
        return self.source != "prior"

    @classmethod
    def prior(cls) -> VerifyProfile:
        return cls({1: 1.0, 65: 1.0 + 64 * PRIOR_COST_PER_DRAFTED_TOKEN}, "prior")

    def seconds(self, k: int) -> float:
        """A verify pass over a pending token and ``k`` drafted ones (span ``k + 1``), in the profile's unit;
        interpolated between measured spans, extended with the slope of the last two beyond the longest."""
        n = k + 1
        if n in self.spans:
            return self.spans[n]
        lengths = sorted(self.spans)
        i = bisect_left(lengths, n)
        if i == 0:
            return self.spans[lengths[0]]
        a, b = (lengths[-2], lengths[-1]) if i == len(lengths) else (lengths[i - 1], lengths[i])
        slope = (self.spans[b] - self.spans[a]) / (b - a)
        return max(self.spans[a] + slope * (n - a), self.spans[a])

    def ratio(self, k: int) -> float:
        """Plain steps per verify pass of ``k`` drafted tokens."""
        return self.seconds(k) / self.spans[1]

    def best_case_gain(self, k: int, draft_cost: float = 0.0) -> float:
        """Tokens per plain step when all ``k`` drafted tokens are accepted and each costs ``draft_cost`` steps."""
        return (k + 1) / (self.ratio(k) + draft_cost * k)


def measure(target: LlamaTarget, spans: tuple[int, ...] = SPANS) -> VerifyProfile:
    """Times verify passes over ``spans`` on ``target`` (an idle one: its context is cleared before and after)."""
    best = _timed(target, spans, REPEATS, ATTEMPTS)
    return VerifyProfile(best, "measured") if best else VerifyProfile.prior()


def _timed(target: LlamaTarget, spans: tuple[int, ...], repeats: int, attempts: int = 1,
           prefix: int = PREFIX_TOKENS,
           settled: Callable[[Mapping[int, float]], bool] | None = None) -> dict[int, float]:
    """The fastest of ``repeats`` passes over each span that fits, after ``prefix`` tokens of context; more runs
    (up to ``attempts``) until the fastest so far are ``settled`` (by default: a curve that does not look
    disturbed). Empty when no span fits or the first is not 1."""
    room = min(target.n_batch, target.n_ctx - prefix - 1)
    usable = tuple(n for n in spans if n <= room)
    if not usable or usable[0] != 1:
        return {}
    tok = target.tokenizer
    line = tok.tokenize(b"def measure(x):\n    return [x * i for i in range(10)]  # a line of code\n")
    tokens = line * (1 + (prefix + usable[-1]) // max(len(line), 1))
    target.reset()
    best: dict[int, float] = {}

    def time_span(n: int) -> None:
        start = time.perf_counter()
        target.eval_span(tokens[prefix : prefix + n])
        best[n] = min(best.get(n, float("inf")), time.perf_counter() - start)
        target.rollback(prefix)

    try:
        target.eval_prompt(tokens[:prefix])
        for n in (2, *[1] * WARM_STEPS):  # the first batched pass sets buffers up; the first steps run slow
            target.eval_span(tokens[prefix : prefix + n])
            target.rollback(prefix)
        for _ in range(attempts):  # each run keeps the fastest so far
            for _ in range(repeats):
                # Span 1 twice: every ratio divides by it, and one slow pass there makes all drafts look cheap.
                for n in (*usable, 1):
                    time_span(n)
            if (settled or consistent)(best):
                break
        for _ in range(RETIMES):  # a span slower than a longer one: timed again, alone, until its fastest shows
            if not (slow := dipped(best)):
                break
            for n in slow:
                time_span(n)
    finally:
        target.reset()
    return best


def dipped(spans: Mapping[int, float]) -> list[int]:
    """The spans that cost more than a longer one by more than ``consistent`` allows."""
    return [n for n in sorted(spans)
            if any(spans[m] < (1 - MAX_DIP) * spans[n] and spans[n] - spans[m] > DIP_FLOOR_S for m in spans if m > n)]


def consistent(spans: Mapping[int, float]) -> bool:
    """Whether no span costs less than ``1 - MAX_DIP`` of a shorter one's cost: a curve measured undisturbed."""
    return not dipped(spans)


def agrees(cached: Mapping[int, float], now: Mapping[int, float]) -> bool:
    """Whether a cached curve still describes the machine, by a check span timed ``now`` (with span 1): what that
    pass costs beyond a plain step, in plain steps, may differ by ``DRIFT_STEPS`` or by a factor under
    ``DRIFT_FACTOR``. Passes under ``TIMER_FLOOR_S`` are timer noise and always agree."""
    if not now.get(1) or now[1] < TIMER_FLOOR_S or len(now) < 2:
        return True
    span = max(now)
    then = VerifyProfile(cached).ratio(span - 1) - 1
    fresh = now[span] / now[1] - 1
    low, high = sorted((max(then, 0.0), max(fresh, 0.0)))
    return high - low <= DRIFT_STEPS or high <= DRIFT_FACTOR * max(low, DRIFT_STEPS)


def still_holds(target: LlamaTarget, spans: Mapping[int, float]) -> bool:
    """Whether a cached curve ``agrees`` with a check span timed on ``target`` now, in one of ``CHECK_ATTEMPTS``
    timings (each keeps the fastest pass of each span so far: a stall passes, a real change does not)."""
    def holds(now: Mapping[int, float]) -> bool:
        return agrees(spans, now)

    return holds(_timed(target, (1, CHECK_SPAN), CHECK_REPEATS, CHECK_ATTEMPTS, CHECK_PREFIX, settled=holds))


def fingerprint(target: LlamaTarget) -> str:
    """What the curve depends on: the model file, threads, offload, where the weights are, the llama.cpp build and the
    machine."""
    import llama_cpp

    from ds4spec.backend.huge_pages import anonymous_huge_pages, thp_mode
    from ds4spec.backend.runtime import system_info

    st = target.path.stat()
    # system_info names the kernels the build has (AVX2 only, AVX-512, ...): one CPU can run either build. Weights
    # read onto huge pages make a step cheaper than mapped ones, a pass over many tokens less so (run 74).
    parts = (str(target.path.resolve()), st.st_size, st.st_mtime_ns, target.n_threads, target.n_gpu_layers,
             target.n_batch, llama_cpp.__version__, system_info(), platform.machine(), platform.processor(),
             os.cpu_count(), _cpu_model(), target.weights_read, anonymous_huge_pages(os.environ, thp_mode()))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:20]


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return ""


def cache_file() -> Path:
    return data_dir() / "verify-costs.json"


def checks_file() -> Path:
    """When each cached curve was last measured or checked (apart: the curves' file keeps its old format)."""
    return data_dir() / "verify-checks.json"


def profile_for(target: LlamaTarget, *, announce: bool = True, now: float | None = None) -> VerifyProfile:
    """The cached curve for this target and machine, checked against the machine at most every ``CHECK_EVERY_S``,
    or a fresh measurement (about 6 s on a 2-core CPU for a 1.5B model), saved for next time. A cache that cannot
    be read or written only costs a measurement."""
    now = time.time() if now is None else now
    key = fingerprint(target)
    cache, checks = read_json(cache_file()), read_json(checks_file())
    entry = cache.get(key)
    why = "once"
    if isinstance(entry, dict):
        with contextlib.suppress(ValueError, TypeError):
            spans = {int(n): float(s) for n, s in entry.items()}
            if spans.get(1, 0) > 0 and consistent(spans):
                checked = checks.get(key)
                if isinstance(checked, (int, float)) and 0 <= now - checked < CHECK_EVERY_S:
                    return VerifyProfile(spans, "cached")
                if still_holds(target, spans):
                    write_json(checks_file(), {**checks, key: now})
                    return VerifyProfile(spans, "cached")
                why = "the cached ones no longer hold"
    if announce and sys.stderr.isatty():  # a pause on first use is explained; a script's stderr stays clean
        print(f"ds4spec: measuring verify costs of {target.name} on this machine ({why})", file=sys.stderr)
    profile = measure(target)
    if profile.source == "measured" and consistent(profile.spans):
        write_json(cache_file(), {**cache, key: {str(n): s for n, s in profile.spans.items()}})
        write_json(checks_file(), {**checks, key: now})
    return profile


def read_json(path: Path) -> dict[str, Any]:
    """A cache file's mapping; empty when it is missing or unreadable (a cache that cannot be read costs a
    measurement)."""
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            return loaded
    return {}


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replaces a cache file at once (written aside, then moved); one that cannot be written is left."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(path)
