"""Speculative decoding with a drafter of any tokenizer: the cycle, as a stream of events.

One cycle (words as ``ds4spec.core.events`` defines them)::

    k = policy.draft_length()                       # 0: a plain step (not asked when the drafter has nothing)
    text = drafter.propose(...)                     # draft TEXT, in the drafter's own tokens
    draft = align_draft(target tokenizer, text)     # target tokens, never rewriting committed ones
    rows = target.eval_span_view([pending, *draft]) # ONE forward pass
    verdict = verify_draft(rows, draft, sampler)    # accepted prefix + the target's own token
    target.rollback(...)                            # forget the rejected tail
    commit accepted (DRAFT) and the own token (TARGET); drafter.extend(their bytes)

``pending`` is the last committed token, not yet evaluated. Where the target's passes run beside the caller (a
GPU), a cycle that drafted nothing launches pending's plain step before its bookkeeping (``EarlyLaunch`` says
where that pays); a draft decided after it is judged by that step's row first, then by a pass of its own. Every
committed token is one the target's sampler chose at its position, so greedy output equals plain greedy output and
sampled output follows the target's distribution (see ``ds4spec.core.verify``). The engine knows nothing of
screens.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ds4spec.core.align import align_draft
from ds4spec.core.contracts import DraftPolicy, Proposer, Target
from ds4spec.core.drafting import NO_DRAFT, DraftContext
from ds4spec.core.early_launch import EarlyLaunch
from ds4spec.core.events import CycleReport, Event, FinishReason, Provenance
from ds4spec.core.plain import Generation, GenerationRequest, launch_ahead, take_back
from ds4spec.core.stats import EventCounts
from ds4spec.core.verify import Verdict, verify_draft

ALIGN_WINDOW = 8  # committed target tokens re-tokenized with each draft
# A model draft's last word is offered as it stands (``align_draft``'s ``unstable_tail``): F16 pair, HumanEval, one
# process, interleaved with plain, against the tail dropped: 1.46x against 1.39x (triggers) and 1.46x against 1.40x
# (pair) on prompts 0 to 9, 1.33x against 1.25x (triggers) on prompts 10 to 19.
OFFER_MODEL_TAIL = True


@dataclass(frozen=True, slots=True)
class SpecSettings:
    draft_max: int = 64  # the most target tokens one draft may hold
    warmup_tokens: int = 32  # speculation starts once the context holds this many tokens (prompt included)
    confidence_stop: bool = True  # a model's draft stops where the policy's ``takes_next`` says


def generate_speculative(
    target: Target,
    drafter: Proposer,
    request: GenerationRequest,
    context: DraftContext,
    settings: SpecSettings | None = None,
    *,
    policy: DraftPolicy,
    cancelled: Callable[[], bool] = lambda: False,
) -> Iterator[Event]:
    settings = settings or SpecSettings()
    generation = Generation(target, request)
    stats = generation.stats
    cycle = _Cycle(target, drafter, generation, settings, policy)
    failures_before = drafter.failures.total
    try:
        drafter.begin(context)
        cycle.policy.begin(context)
        drafter.warm()  # with cores to spare, the drafter reads its prompt while the target reads its own
        reason = yield from cycle.run(cancelled, generation)
    except KeyboardInterrupt:
        reason = FinishReason.CANCELLED
    stats.drafter_failures = drafter.failures.total - failures_before
    stats.loop_seconds = sum(cycle.loop_samples)
    stats.loop_median_seconds = float(np.median(cycle.loop_samples)) if cycle.loop_samples else 0.0
    stats.plain_step_seconds = policy.plain_step_seconds() or 0.0
    yield from generation.out.finish(reason, generation.clock)


class CatchUpDebt:
    """The drafter's first catch-up in a generation (reading the prompt), charged to the drafting cycles after it.

    Charged to one cycle, it would make that draft length look dear for as long as the policy remembers (a
    drafter that pays would stop being asked); left out, as it once was, a drafter whose catch-up costs more
    than drafting can win back is asked on and on (measured: 2.17 s for 4 drafted tokens). So it is spread over
    the drafting cycles the rest of the generation can hold, about one for every two tokens left.
    """

    def __init__(self) -> None:
        self.owed = 0.0
        self._share = 0.0

    def incur(self, seconds: float, tokens_left: int) -> None:
        self.owed += seconds
        self._share = self.owed / max(1.0, tokens_left / 2)

    def instalment(self) -> float:
        paid = min(self.owed, self._share)
        self.owed -= paid
        return paid


class _Cycle:
    def __init__(
        self,
        target: Target,
        drafter: Proposer,
        generation: Generation,
        settings: SpecSettings,
        policy: DraftPolicy,
    ) -> None:
        self.target = target
        self.tok = target.tokenizer
        self.drafter = drafter
        self.request = generation.request
        self.settings = settings
        self.policy = policy
        self.sampler = generation.sampler
        self.out = generation.out
        self.stats = generation.stats
        self.drafter_tokens_per_target_token = 1.0
        # Per cycle, the seconds outside model calls (target passes, drafter proposals) and outside the
        # consumer: alignment, verdicts, policy, syntax tracking, detokenizing. On a GPU a large target's
        # step takes 10 to 20 ms, so this must stay well under that.
        self.loop_samples: list[float] = []
        self.catch_up = CatchUpDebt()
        self.proposal = NO_DRAFT  # the drafter's last proposal (its tokens' confidences, for the policy)
        self.early = policy.early_launch or EarlyLaunch()

    def run(self, cancelled: Callable[[], bool], generation: Generation) -> Generator[Event, None, FinishReason]:
        target = self.target
        logits = generation.read_prompt(target, cancelled)
        if logits is None:
            return FinishReason.CANCELLED
        pending = self.sampler.choose(logits, target.recent_tokens(self.request.sampling.repeat_last_n))
        chunk, reason = self.out.commit(pending, Provenance.TARGET)
        if chunk:
            yield chunk
        if reason:
            return reason
        self._follow(self.tok.piece(pending))
        ahead = False  # pending's plain step was launched in the last cycle, its rows not read yet
        plain = False  # whether the last cycle drafted nothing
        while True:
            if cancelled():
                return FinishReason.CANCELLED
            if target.n_past >= target.n_ctx:
                return FinishReason.CONTEXT
            start = time.perf_counter()
            draft, requested, source, draft_seconds, sync_seconds, propose_seconds = self._draft(pending, ahead)
            base = target.n_past - ahead
            t0 = time.perf_counter()
            if ahead:
                verdict, model_seconds, passes = self._verify_ahead(draft)
            else:
                if draft:  # nothing to roll back after a plain step
                    target.checkpoint()
                rows = target.eval_span_view([pending, *draft])  # read before the next pass writes over them
                model_seconds, passes = time.perf_counter() - t0, 1
                verdict = self._verify(rows, draft)
            target.rollback(base + 1 + verdict.accepted)
            verify_seconds = time.perf_counter() - t0
            model_seconds += propose_seconds
            # On a GPU the next plain step runs while this cycle's bookkeeping is done (the policy decides whether
            # to draft after it only then; a draft is then verified against that step's row first).
            if plain:
                self.early.after_plain_step(bool(draft) and verdict.accepted > 0)
            plain = not draft
            launched = time.perf_counter()
            ahead = plain and self._may_launch_ahead() and launch_ahead(target, self.out, verdict.token)
            model_seconds += time.perf_counter() - launched
            self._account(len(draft), verdict.accepted, draft_seconds, verify_seconds, passes)
            if draft and self.proposal.confidences:
                self._observe_confidences(draft, verdict.accepted)
            outside = 0.0  # seconds the consumer held the stream
            if draft:
                handed = time.perf_counter()
                yield CycleReport(len(draft), verdict.accepted, draft_seconds, verify_seconds, self.policy.event)
                outside += time.perf_counter() - handed
            committed = [*draft[: verdict.accepted], verdict.token]
            finished: FinishReason | None = None
            for i, token in enumerate(committed):
                own = i == len(committed) - 1
                chunk, finished = self.out.commit(token, Provenance.TARGET if own else Provenance.DRAFT)
                if chunk:
                    handed = time.perf_counter()
                    yield chunk
                    outside += time.perf_counter() - handed
                if finished:
                    break
            if finished and ahead:
                take_back(target)
            if not finished:
                self._follow(self.tok.detokenize(committed))
            spent = time.perf_counter() - start
            if not self.policy.charges_reading:
                spent -= sync_seconds  # a catch-up is no cost of this draft's length...
                if sync_seconds:
                    self.catch_up.incur(sync_seconds, self.request.max_tokens - len(self.out.tokens))
                if draft:  # ...but it is a cost of drafting: the cycles that draft pay it off
                    spent += self.catch_up.instalment()
            # The cycle that ends the answer is observed too: a policy's figures outlive one answer.
            self.policy.observe(requested, len(draft), verdict.accepted, spent, source)
            self.loop_samples.append(time.perf_counter() - start - model_seconds - outside)
            if plain:
                self.early.plain_step(model_seconds, self.loop_samples[-1])
            if finished:
                return finished
            pending = verdict.token

    def _may_launch_ahead(self) -> bool:
        """Whether the target runs passes beside the loop and launching ahead is forced or pays here."""
        mode = self.target.launches_ahead
        return mode == "always" or (mode == "where_it_pays" and self.early.pays())

    def _verify_ahead(self, draft: list[int]) -> tuple[Verdict, float, int]:
        """The verdict on ``draft`` after the plain step launched ahead for pending, the seconds spent in the target,
        and its passes: the step's row judges the draft's first token, and only a first token that holds takes a
        pass over the draft (a draft rejected there costs nothing beyond the step)."""
        target = self.target
        start = time.perf_counter()
        first = self.sampler.choose(target.span_rows()[0], target.recent_tokens(self.request.sampling.repeat_last_n))
        if not draft or first != draft[0]:
            return Verdict(0, first), time.perf_counter() - start, 1
        target.checkpoint()
        rows = target.eval_span_view(draft)
        seconds = time.perf_counter() - start
        rest = self._verify(rows, draft[1:])
        return Verdict(1 + rest.accepted, rest.token), seconds, 2

    def _follow(self, committed: bytes) -> None:
        """The drafter and the policy both follow the committed text."""
        self.drafter.extend(committed)
        self.policy.extend(committed)

    def _draft(self, pending: int, ahead: bool) -> tuple[list[int], int, str, float, float, float]:
        """Target tokens to verify after ``pending`` (whose step was launched ``ahead``, or not), how many were asked
        for, the draft's source (``none`` when there was none), the seconds it took, how many of them the drafter
        spent catching up, and how many in its proposal (the model's work, catch-up included; the rest is
        alignment)."""
        target = self.target
        self.proposal = NO_DRAFT
        held = target.n_past - ahead  # the context before pending
        room = min(
            target.n_ctx - held - 1,
            target.n_batch - 1,
            self.request.max_tokens - len(self.out.tokens),
        )
        if held + 1 < self.settings.warmup_tokens or not self.drafter.available:
            return [], 0, "none", 0.0, 0.0, 0.0
        if not self.drafter.may_propose():
            # Weighing lengths, syntax events included, costs more than a search of the text (on code, most cycles
            # of lookup alone have no match): 0.2 ms of a GPU target's 2 ms step for the triggers.
            self.policy.pass_over()
            return [], 0, "none", 0.0, 0.0, 0.0
        k = min(self.policy.draft_length(), room)
        if k <= 0:
            return [], 0, "none", 0.0, 0.0, 0.0
        t0 = time.perf_counter()
        # align_draft re-tokenizes the window's last tokens after any control token (template markup).
        window = target.recent_tokens(ALIGN_WINDOW) if ahead else [*target.recent_tokens(ALIGN_WINDOW - 1), pending]

        last: dict[bytes, list[int]] = {}  # the text enough() last aligned: the draft, when the model stopped there

        def enough(text: bytes) -> bool:  # asked by a model drafter only
            last.clear()
            last[text] = aligned = align_draft(self.tok, window, text, max_tokens=k, window=ALIGN_WINDOW,
                                               unstable_tail=OFFER_MODEL_TAIL)
            return len(aligned) >= k

        def worth(confidences: Sequence[float]) -> bool:  # asked after enough(), for the token after its text
            return self.policy.takes_next(confidences, len(next(iter(last.values()), ())), k)

        # A model stops as soon as its text gives k target tokens (measured on HumanEval with SmolLM2 drafting 4:
        # asking for a fixed two more than the expected count cost 2.3 more of its forward passes a cycle, for 1%
        # more accepted); its last word is offered as it stands (``align_draft``'s ``unstable_tail``).
        want = math.ceil(k * self.drafter_tokens_per_target_token) + 2
        proposal = self.drafter.propose(want, source=self.policy.source, enough=enough,
                                        worth=worth if self.settings.confidence_stop else None)
        propose_seconds = time.perf_counter() - t0
        self.proposal = proposal
        self.policy.observe_reading(proposal.read_seconds)
        draft: list[int] = []
        if proposal.text:
            tail = OFFER_MODEL_TAIL and proposal.source == "model"
            draft = last[proposal.text] if proposal.text in last else align_draft(
                self.tok, window, proposal.text, max_tokens=k, window=ALIGN_WINDOW, unstable_tail=tail)
            if draft and proposal.drafter_tokens:
                ratio = proposal.drafter_tokens / len(draft)
                self.drafter_tokens_per_target_token = 0.8 * self.drafter_tokens_per_target_token + 0.2 * ratio
        return draft, k, proposal.source, time.perf_counter() - t0, proposal.sync_seconds, propose_seconds

    def _observe_confidences(self, draft: list[int], accepted: int) -> None:
        """Tells the policy which of the model's tokens the target kept: those whose text the accepted tokens cover.
        A healed first token that only finished the committed text was not judged."""
        ends = self.proposal.ends
        judged = bisect_right(ends, 0)
        held = bisect_right(ends, len(self.tok.detokenize(draft[:accepted])))
        verified = bisect_right(ends, len(self.tok.detokenize(draft)))
        self.policy.observe_confidences(self.proposal.confidences[judged:], held - judged, verified - judged)

    def _verify(self, rows: np.ndarray, draft: list[int]) -> Verdict:
        last_n = self.request.sampling.repeat_last_n
        if not draft:  # a plain step, chosen as plain decoding chooses it (most cycles where nothing pays)
            return Verdict(0, self.sampler.choose(rows[0], self.target.recent_tokens(last_n)))
        span = len(draft) + 1
        # History for the repeat penalty at span position i: the context up to and including span[i].
        recent = self.target.recent_tokens(last_n + span) if self.request.sampling.repeat_penalty != 1 else []

        def choose(row: np.ndarray, i: int) -> int:
            history = recent[: len(recent) - (span - 1 - i)][-last_n:] if recent else ()
            return self.sampler.choose(row, history)

        return verify_draft(rows, draft, choose)

    def _account(self, drafted: int, accepted: int, draft_s: float, verify_s: float, passes: int) -> None:
        s = self.stats
        if self.policy.event:
            s.events.setdefault(self.policy.event, EventCounts()).add(drafted, accepted)
        s.target_forward_passes += passes
        s.draft_seconds += draft_s
        s.verify_seconds += verify_s
        if drafted:
            s.verify_passes_with_draft += 1
            s.drafted_tokens += drafted
            s.accepted_tokens += accepted
            if accepted < drafted:
                s.corrected_tokens += 1
            else:
                s.bonus_tokens += 1



