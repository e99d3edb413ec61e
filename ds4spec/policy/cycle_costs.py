"""What a cycle costs at each draft length, measured and estimated, and the length with the best expected rate.

A verify pass over several tokens costs more than one plain step on a CPU (measured on this project's 2-core machines
with Qwen2.5-Coder-1.5B Q4_K_M: spans of 2, 4, 8, 16 and 64 tokens cost 1.8, 3.4, 7.5, 8.8 and 26.5 plain steps;
``ds4spec.policy.profile``), and a model drafter costs time too. ``CycleCosts`` keeps the wall time of whole cycles
for each length (drafting, aligning, verifying, rolling back, bookkeeping) and estimates the lengths not yet seen
along the machine's verify profile; ``best_length`` weighs them against the tokens a draft is expected to commit
(``ds4spec.policy.acceptance``).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable

from ds4spec.policy.acceptance import expected_tokens
from ds4spec.policy.profile import PRIOR_COST_PER_DRAFTED_TOKEN, VerifyProfile
from ds4spec.policy.stalls import bounded, stalled

EMA = 0.25  # weight of a new measurement
PLAIN_REFRESH = 64  # cycles between plain steps at most, so that a plain step's cost never goes stale
# The first plain steps measured settle on the fastest of them, and a generation's first cycle is not one of them
# (while the drafter reads its prompt beside it: measured on the F16 pair, 72 to 86 ms against 71 to 75 for the
# steps after it). Averaged in, that first step set the yardstick 10% dear for the dozens of cycles a drafting
# policy takes to measure a few more plain steps, and a draft that lost time looked like a win.
PLAIN_SETTLING = 3
OPTIMISTIC_ALPHA = 0.9  # the acceptance a drafter is given the benefit of when deciding whether to try it at all
# A plain step that moved less than this (relative) since the other lengths' costs were estimated leaves the estimates,
# and the best length found with them, standing: every cycle measures a plain step or a draft, and a plain step's
# noise moves its average by 1 to 2% a cycle. Re-estimating the 20 lengths and ranking them every cycle took 0.09 ms of
# the lookup gate's 0.3 ms a cycle outside model calls (AVX2 CPU); on a GPU, whose host CPU is faster, a target's step
# takes 2.2 ms. A length whose rate is within a few percent of the best's is as good a choice.
ESTIMATE_DRIFT = 0.05
# The plain steps right after a drafting cycle can cost more than others: on a GPU, llama.cpp replays a captured CUDA
# graph only for a pass of the shape it captured, and after a pass over several tokens the next single-token pass runs
# uncaptured and the one after captures again (measured on an H200, 1.5B Q4_K_M target: 3.3 and 3.5 ms against a 2.0
# ms step, 1.4 plain steps more a drafting cycle). Those steps are charged to the drafting cycle, not taken for plain
# steps: taken so, they made the yardstick 2.7 ms and drafting look cheap.
AFTERMATH_CYCLES = 2
BEST_MEMORY = 64  # answers remembered per table (one per alpha and set of lengths asked since the estimates changed)
# A length past the longest measured one is estimated along the profile from that one alone, its scale against the
# profile drawn toward the scale all measured lengths share by this many measurements: one cycle is noisy by 5 to 10%
# on these CPUs, and a longest length measured once scaled every longer one with its noise. Measured (AVX2 kernels,
# lookup in long copies): one 46-token cycle 6% dear priced 47 and 63 tokens above 31 for the rest of the run, whose
# rates differ by 3 to 8% on the profile, and the triggers stopped at 31 where lookup alone drafted 47 to 63.
SHARED_SCALE_WEIGHT = 2.0
MEASURES_COUNTED = 7  # an EMA at weight 0.25 averages about this many measurements


def _ema(old: float | None, new: float) -> float:
    return new if old is None else (1 - EMA) * old + EMA * bounded(new, old)


class CycleCosts:
    """Seconds per cycle for each draft length, as measured; estimated for lengths not yet seen.

    A measured length costs what it was measured to cost (under the current context length, with this
    drafter). Other lengths are estimated from the nearest measured ones: with a measured
    :class:`VerifyProfile`, along the profile's curve (on a CPU it jumps at 8 tokens and dips at 16, which
    a few measured lengths cannot show), past the longest one with its scale weighed by how often it was
    measured against the scale the measured lengths share (``SHARED_SCALE_WEIGHT``); without one, by
    interpolation, or with a prior cost per token.
    """

    def __init__(self, profile: VerifyProfile | None = None) -> None:
        self.profile = profile or VerifyProfile.prior()
        self._seconds: dict[int, float] = {}
        self._counts: dict[int, int] = {}  # measurements of each length, up to MEASURES_COUNTED
        self._known: list[int] = []  # sorted keys of _seconds
        self._since_plain = 0
        self._ratios: dict[int, float] = {}
        self._shared_scale: float | None = None  # of the measured drafting lengths, while the estimates stand
        self._estimates: dict[int, float] = {}  # cost() of each length since the last measurement: a policy asks
        self._ranked: dict[int, list[int]] = {}  # for the same ones every cycle (triggers: 20 a cycle, 0.08 ms)
        self._estimated_at: float | None = None  # the plain step the estimates were made with
        # best_length's answers, with what they answer (alpha, the first token's apart, the lengths)
        self._best: dict[tuple[float, float | None, tuple[int, ...]], tuple[int, float]] = {}
        self.version = 0  # counts the changes of any drafting length's cost: a caller may keep rates until it moves
        self._drafts_seen = 0  # measurements of drafting cycles
        self._plain_seen = 0
        self._generation_starts = False
        self._aftermath: float | None = None  # seconds the plain steps after a drafting cycle cost beyond plain steps
        self._after_left = 0  # plain steps still to come in the current aftermath
        self._after_sum = 0.0  # what they cost beyond plain steps so far
        self._after_learned = False  # whether this table drafted, and so learns the current aftermath
        self._set_aside_lengths: set[int] = set()  # lengths whose first cycle was set aside as a stall (``_set_aside``)

    def new_generation(self) -> None:
        """The next cycle is a generation's first: as a plain step it is no measure of one (``PLAIN_SETTLING``)."""
        self._generation_starts = True

    def generation_started(self) -> None:
        """A cycle of this generation was measured (by this table, or by another source's)."""
        self._generation_starts = False

    def observe(self, k: int, seconds: float, drafting: float = 0.0) -> None:
        """A cycle drafting ``k`` tokens (0: a plain step) took ``seconds``. ``drafting``: what the drafter was
        expected to take for them (its token's cost measured at load), beside which a length's first cycle is judged
        (``_set_aside``)."""
        first, self._generation_starts = self._generation_starts, False
        if k == 0 and first and 0 in self._seconds:
            return
        if k == 0 and self._after_left:
            self._after_step(seconds)
            return
        if k:
            self.aftermath_begins(learn=True)
            if self._set_aside(k, seconds, drafting):
                self._since_plain += 1
                return
        if k not in self._seconds:
            insort(self._known, k)
            self._ranked.clear()
        if k == 0 and self._plain_seen < PLAIN_SETTLING:
            self._seconds[0] = min(self._seconds.get(0, seconds), seconds)
        else:
            self._seconds[k] = _ema(self._seconds.get(k), seconds)
        self._counts[k] = min(self._counts.get(k, 0) + 1, MEASURES_COUNTED)
        self._plain_seen += k == 0
        self._since_plain = 0 if k == 0 else self._since_plain + 1
        self._drafts_seen += k > 0
        plain, basis = self._seconds.get(0), self._estimated_at
        if k or plain is None or basis is None or abs(plain - basis) > ESTIMATE_DRIFT * basis:
            self._estimates.clear()
            self._costs_changed()
            self._shared_scale = None
            self._estimated_at = plain

    def _set_aside(self, k: int, seconds: float, drafting: float) -> bool:
        """Whether a cycle is taken for a stall and learned as nothing: the first of its length, far above that
        length's estimate (``stalls``), where no first cycle of it was set aside before. A length's first cycle is
        learned whole (the cycles after it move its cost by ``_ema``, a stall bounded there): one stall in it would
        price it at that stall for a dozen cycles. A length that is dear stays dear, and its second cycle is learned."""
        if k in self._seconds or k in self._set_aside_lengths or 0 not in self._seconds:
            return False
        if not stalled(seconds, self._estimate(k) + drafting):
            return False
        self._set_aside_lengths.add(k)
        return True

    def aftermath_begins(self, learn: bool = False) -> None:
        """A drafting cycle was measured (by this table when ``learn``, else by another source's): the next
        ``AFTERMATH_CYCLES`` plain steps are its aftermath, not plain steps to learn. One cut short by another draft
        is learned as it stands: that draft pays the rest."""
        self._end_aftermath()
        if 0 in self._seconds:  # before a plain step is known there is nothing to measure an excess against
            self._after_left, self._after_sum, self._after_learned = AFTERMATH_CYCLES, 0.0, learn

    def aftermath(self) -> float:
        """Seconds a drafting cycle's aftermath is learned to cost beyond plain steps (never below none)."""
        return max(0.0, self._aftermath or 0.0)

    def _after_step(self, seconds: float) -> None:
        plain = self._seconds[0]
        self._after_sum += bounded(seconds - plain, plain)  # a stall counts as much as in _ema
        self._after_left -= 1
        if not self._after_left:
            self._end_aftermath()

    def _end_aftermath(self) -> None:
        if self._after_learned:
            old = self._aftermath
            self._aftermath = self._after_sum if old is None else (1 - EMA) * old + EMA * self._after_sum
            self._costs_changed()
        self._after_left, self._after_learned = 0, False

    def _costs_changed(self) -> None:
        self._best.clear()
        self.version += 1

    def best(self, alpha: float, lengths: tuple[int, ...], first: float | None = None) -> tuple[int, float]:
        """``best_length`` without extra costs, remembered until the estimates change."""
        key = (alpha, first, lengths)
        if (found := self._best.get(key)) is None:
            if len(self._best) >= BEST_MEMORY:
                self._best.clear()
            found = self._best[key] = _best_length(self, alpha, lengths, _no_extra, first)
        return found

    def ranked_lengths(self, draft_max: int) -> list[int]:
        """The lengths worth comparing (each cycle compares them all, so not every one up to ``draft_max``): the
        candidates, the lengths whose span the profile measured (its cheap block sizes), and measured ones."""
        if draft_max not in self._ranked:
            spans = (n - 1 for n in self.profile.spans if 1 <= n - 1 <= draft_max) if self.profile.measured else ()
            measured = (k for k in self._known if 0 < k <= draft_max)
            self._ranked[draft_max] = sorted({*candidate_lengths(draft_max), *spans, *measured})
        return list(self._ranked[draft_max])

    def plain_is_stale(self) -> bool:
        """Whether a plain step is due: every cost is judged against it, and a stall measured once would
        otherwise make drafting look cheap for as long as the gate keeps drafting."""
        return self._since_plain >= PLAIN_REFRESH

    def measured(self, k: int) -> bool:
        return k in self._seconds

    def measured_lengths(self) -> list[int]:
        return list(self._known)

    def plain_step(self) -> float | None:
        return self._seconds.get(0)

    def steps_lost(self, k: int) -> float:
        """Plain steps a cycle drafting ``k`` tokens costs beyond the plain step it replaces: what a rejected draft of
        them loses (never below 0)."""
        return max(0.0, self.cost(k) / self.cost(0) - 1)

    @property
    def drafts_measured(self) -> bool:
        return self._drafts_seen > 0

    def cost(self, k: int) -> float:
        """Seconds a cycle drafting ``k`` tokens costs, the aftermath of a drafting cycle included."""
        if k in self._seconds:
            base = self._seconds[k]
        else:
            if k not in self._estimates:
                self._estimates[k] = self._estimate(k)
            base = self._estimates[k]
        return base + self.aftermath() if k else base

    def _estimate(self, k: int) -> float:
        i = bisect_left(self._known, k)
        below, above = self._known[:i], self._known[i:]
        step = self._seconds.get(0, 1.0)
        if self.profile.measured:
            return self._along_profile(k, below[-1] if below else None, above[0] if above else None)
        if below and above:  # interpolate between the nearest measured lengths
            a, b = below[-1], above[0]
            return self._seconds[a] + (self._seconds[b] - self._seconds[a]) * (k - a) / (b - a)
        if below:
            return self._seconds[below[-1]] + PRIOR_COST_PER_DRAFTED_TOKEN * step * (k - below[-1])
        return step * (1 + PRIOR_COST_PER_DRAFTED_TOKEN * k)

    def _along_profile(self, k: int, below: int | None, above: int | None) -> float:
        """The profile's shape, scaled to the measured lengths on either side (weighted by closeness); beyond the
        longest, to its scale drawn toward the shared one (``SHARED_SCALE_WEIGHT``)."""
        ratio = self._ratio
        if below is None or above is None:
            beside = below if above is None else above
            return ratio(k) if beside is None else self._extrapolated_scale(beside) * ratio(k)
        from_a, from_b = (self._seconds[n] * ratio(k) / ratio(n) for n in (below, above))
        return from_a + (from_b - from_a) * (k - below) / (above - below)

    def _extrapolated_scale(self, n: int) -> float:
        own, count = self._measured_scale(n), self._counts[n]
        if not n:  # the plain step: the yardstick, measured every few cycles
            return own
        if self._shared_scale is None:
            drafts = [d for d in self._known if d]
            weights = sum(self._counts[d] for d in drafts)
            self._shared_scale = sum(self._counts[d] * self._measured_scale(d) for d in drafts) / weights
        return (count * own + SHARED_SCALE_WEIGHT * self._shared_scale) / (count + SHARED_SCALE_WEIGHT)

    def _measured_scale(self, n: int) -> float:
        """Measured length ``n``'s seconds per plain step of the profile."""
        return self._seconds[n] / self._ratio(n)

    def _ratio(self, k: int) -> float:
        if k not in self._ratios:
            self._ratios[k] = self.profile.ratio(k)
        return self._ratios[k]


def could_pay_on(profile: VerifyProfile, draft_cost: float, draft_max: int, alpha: float = OPTIMISTIC_ALPHA,
                 margin: float = 0.0) -> bool:
    """Whether drafting at ``draft_cost`` plain steps per drafted token could beat plain decoding by more than
    ``margin`` (a share of its rate) at acceptance ``alpha`` on ``profile``, charging only the verify pass and the
    drafting (an upper bound on the rate: a source that fails this is not worth a try). On the measured 2-core CPU
    profile a free drafter passes (a pass over 4 tokens costs 3.35 steps and yields 3.44 at 90%); one at 0.1 steps a
    token or more does not."""
    lengths = {*candidate_lengths(draft_max), *(n - 1 for n in profile.spans if 1 <= n - 1 <= draft_max)}
    return any(expected_tokens(alpha, k) > (1 + margin) * (profile.ratio(k) + draft_cost * k) for k in lengths)


def best_length(costs: CycleCosts, alpha: float, lengths: Iterable[int],
                extra: Callable[[float], float] | None = None, first: float | None = None) -> tuple[int, float]:
    """Among ``lengths``, the one with the best expected rate ``E(k) / (cost(k) + extra(E(k)))`` (the shorter on a
    tie), and that rate; ``(0, 0.0)`` when ``lengths`` is empty. ``extra``: seconds a cycle costs besides its
    measured cost, given the tokens it is expected to write (a drafter's read of unseen text); ``first``: the
    acceptance of a draft's first token where it differs from the later tokens' ``alpha`` (``expected_tokens``)."""
    if extra is None:
        return costs.best(alpha, tuple(lengths), first)
    return _best_length(costs, alpha, lengths, extra, first)


def _no_extra(tokens: float) -> float:
    return 0.0


def _best_length(costs: CycleCosts, alpha: float, lengths: Iterable[int],
                 extra: Callable[[float], float], first: float | None = None) -> tuple[int, float]:
    best, best_rate = 0, 0.0
    for k in lengths:
        tokens = expected_tokens(alpha, k, first)
        rate = tokens / (costs.cost(k) + extra(tokens))
        if rate > best_rate:
            best, best_rate = k, rate
    return best, best_rate


def candidate_lengths(draft_max: int) -> list[int]:
    """The lengths worth telling apart: 1, 2, 3, 4, 6, 8, 12, 16, ... up to draft_max."""
    out = [k for k in (1, 2, 3, 4, 6) if k <= draft_max]
    k = 8
    while k <= draft_max:
        out += [k, k + k // 2] if k + k // 2 <= draft_max else [k]
        k *= 2
    if draft_max > 0 and draft_max not in out:
        out.append(draft_max)
    return sorted(set(out))
