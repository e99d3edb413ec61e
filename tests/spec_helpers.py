"""Shared pieces of the speculative tests: the plain-decoding oracle, an oracle drafter, and faulty drafters."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

import numpy as np

from ds4spec.backend.target import LlamaTarget
from ds4spec.core.contracts import DraftPolicy
from ds4spec.core.drafting import NO_DRAFT, Draft, DraftContext, Drafter
from ds4spec.core.events import CycleReport, Finished
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import Sampler
from ds4spec.core.speculative import SpecSettings, generate_speculative
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.policy.gate import FixedLength, GatedPolicy


def run_plain(target: LlamaTarget, request: GenerationRequest) -> Finished:
    """Plain greedy output from an empty context, as ``run_spec`` runs: a context kept from an earlier run would
    be reused up to the prompt's last token, which is then read alone rather than in its batch (a near-tie
    could flip on that alone, and the comparison would no longer be of speculation)."""
    target.reset()
    finished = list(generate_plain(target, request))[-1]
    assert isinstance(finished, Finished)
    return finished


def run_spec(
    target: LlamaTarget, drafter: Drafter, request: GenerationRequest, context: bytes | DraftContext, *,
    policy: DraftPolicy | None = None, warmup: int = 0, deadline_s: float = 30.0, background: bool = True,
    inline: bool = False, confidence_stop: bool = True,
) -> tuple[Finished, list[CycleReport], GuardedDrafter]:
    """One speculative generation through a guarded drafter. The deadline is far above any draft's time: at the
    guard's own 2 s, a tiny model's catch-up on the target's thread timed out once on a 2-core machine kept busy by
    two other processes, and the tests that say no draft failed are about the output, not the machine's load (the
    deadline's tests give their own)."""
    guarded = GuardedDrafter(drafter, deadline_s=deadline_s, background=background, inline=inline)
    target.reset()
    if isinstance(context, bytes):
        context = DraftContext(text=context)
    events = list(generate_speculative(target, guarded, request, context,
                                       SpecSettings(warmup_tokens=warmup, confidence_stop=confidence_stop),
                                       policy=policy or GatedPolicy(SpecSettings().draft_max)))
    assert guarded.settle(), "the drafter is still following the text"  # the caller may reuse the drafter
    finished = events[-1]
    assert isinstance(finished, Finished)
    return finished, [e for e in events if isinstance(e, CycleReport)], guarded


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def assert_lossless(target: LlamaTarget, request: GenerationRequest, plain: Finished, spec: Finished) -> bool:
    """Spec output equals plain output, or first differs where the two arithmetic paths disagree.

    llama.cpp computes a span of several tokens with other kernels than a single token (field notes, §3;
    on the real Q4_K_M target the logits differ by up to ~0.5). At the first difference, the speculative
    token must be within that measured disagreement of the best token under plain decoding's own logits
    at that exact position (with a repeat penalty, among the penalised scores); a real bug (a wrong row, a lost
    token, a penalty left out) misses by far more. Returns True when it saw such a kernel flip, so that callers can
    count them.
    """
    if spec.tokens == plain.tokens and spec.reason == plain.reason:
        return False
    i = first_difference(plain.tokens, spec.tokens)
    assert i is not None and i < len(plain.tokens) and i < len(spec.tokens), (
        f"outputs differ in length or finish: plain {len(plain.tokens)} {plain.reason}, "
        f"spec {len(spec.tokens)} {spec.reason}"
    )
    prompt, before = list(request.prompt_tokens), list(plain.tokens[:i])
    target.reset()
    single = target.eval_prompt(prompt)  # plain decoding's path: the prompt, then one token per pass
    for token in before:
        single = target.eval_span([token])[0]
    target.reset()
    batched = target.eval_prompt([*prompt, *before])  # the same position, computed inside a batch
    # Compared as the sampler compares them: with a repeat penalty, the scores after this position's history.
    sampler, history = Sampler(request.sampling), [*prompt, *before]
    single, batched = sampler.penalized(single, history), sampler.penalized(batched, history)
    noise = float(np.abs(single - batched).max())
    deficit = float(single[plain.tokens[i]] - single[spec.tokens[i]])
    assert deficit <= noise + 1e-6, (
        f"speculative output differs at token {i}: its token is {deficit:.4f} below plain's choice, "
        f"more than the {noise:.4f} the two kernels disagree there"
    )
    return True


def word_pieces(data: bytes) -> list[bytes]:
    """A tokenizer unlike any target's: words, runs of spaces, single other bytes."""
    return re.findall(rb"\w+|[ \t]+|\n|[^\w \t\n]", data, flags=re.ASCII) or [data]


class OracleDrafter(Drafter):
    """Proposes exactly the target's own future text, cut into tokens of another tokenizer."""

    name = "oracle"

    def __init__(self, future: bytes, split: Callable[[bytes], list[bytes]] = word_pieces) -> None:
        self.future = future
        self.split = split
        self.offset = 0

    def begin(self, context: DraftContext) -> None:
        self.offset = 0

    def extend(self, committed: bytes) -> None:
        self.offset += len(committed)

    def propose(self, max_tokens: int) -> Draft:
        rest = self.future[self.offset : self.offset + 64 * max_tokens]
        if not rest:
            return NO_DRAFT
        pieces = self.split(rest)[:max_tokens]
        return Draft(b"".join(pieces), "model", len(pieces))


class RaisingDrafter(Drafter):
    name = "raising"

    def begin(self, context: DraftContext) -> None:
        pass

    def extend(self, committed: bytes) -> None:
        pass

    def propose(self, max_tokens: int) -> Draft:
        raise RuntimeError("drafter bug")


class SlowDrafter(RaisingDrafter):
    name = "slow"

    def propose(self, max_tokens: int) -> Draft:
        time.sleep(1.0)
        return Draft(b"x = 1\n" * max_tokens, "model")


class LostDrafter(RaisingDrafter):
    """Fails to follow the text: its view of it is unknown from then on."""

    name = "lost"

    def extend(self, committed: bytes) -> None:
        raise RuntimeError("tokenizer bug")

    def propose(self, max_tokens: int) -> Draft:
        return Draft(b"x = 1\n", "model")


class GarbageDrafter(RaisingDrafter):
    """Returns random bytes (not UTF-8, control-token look-alikes), and sometimes not even a Draft."""

    name = "garbage"

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.calls = 0

    def propose(self, max_tokens: int) -> Draft:
        self.calls += 1
        if self.calls % 3 == 0:
            return "not a draft"  # type: ignore[return-value]
        junk = bytes(self.rng.integers(0, 256, size=int(self.rng.integers(1, 40)), dtype=np.uint8))
        return Draft(junk + b"<|im_end|><|endoftext|>", "model")


class TimedModel(Drafter):
    """A model drafter whose every proposal takes ``seconds``, and reading its text ``read_per_byte`` seconds a
    byte; counts its proposals and the generations it was told of."""

    name = "timed"

    def __init__(self, seconds: float, read_per_byte: float = 0.0) -> None:
        self.seconds = seconds
        self.read_per_byte = read_per_byte
        self.proposals = 0
        self.begins = 0
        self._unread = 0

    def begin(self, context: DraftContext) -> None:
        self.begins += 1
        self._unread = len(context.text or b"")

    def prepare(self, source: str = "any") -> None:
        time.sleep(self._unread * self.read_per_byte)
        self._unread = 0

    def extend(self, committed: bytes) -> None:
        pass

    def propose(self, max_tokens: int) -> Draft:
        self.proposals += 1
        time.sleep(self.seconds)
        return Draft(b" x", "model", 1)


class EveryOtherCycle(FixedLength):
    """Drafts every other cycle: each draft follows a plain step, launched ahead where the target does that."""

    def __init__(self, draft_max: int) -> None:
        super().__init__(draft_max)
        self.turn = 0
        self.cycles = 0

    def draft_length(self) -> int:
        self.turn += 1
        return self.draft_max if self.turn % 2 == 0 else 0

    def observe(self, requested: int, drafted: int, accepted: int, cycle_seconds: float, source: str = "") -> None:
        self.cycles += 1
