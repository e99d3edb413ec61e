"""A drafter's real cost is what the policies judge it by: its catch-ups included, not only its cost per token.

The drafters here are always right and propose instantly, so the load-time check (the cost of a drafted token)
finds them free; what is dear is catching up with the text (a model reading the prompt and what was committed
since it last drafted). Run through ``generate_speculative`` behind the guard, as the engine runs a model drafter
on a CPU without cores to spare: the policy must stop asking the dear ones and keep asking the cheap one, and the
output must equal plain decoding's whatever it decides.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import pairwise

import pytest
from spec_helpers import OracleDrafter, run_plain, run_spec
from tinymodel import build_tiny_gguf

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.drafting import Draft, DraftContext
from ds4spec.core.plain import GenerationRequest
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.policy.acceptance import AcceptanceModel
from ds4spec.policy.costs import measure_source
from ds4spec.policy.cycle_costs import CycleCosts, could_pay_on
from ds4spec.policy.gate import GatedPolicy
from ds4spec.policy.memory import PolicyMemory
from ds4spec.policy.probing import FIRST_PROBE_AFTER
from ds4spec.policy.profile import VerifyProfile, measure

PROMPT = b"def fib(n):\n"
BUDGET = 96
DRAFT_MAX = 8
# Catch-ups are priced in the target's plain steps as the plain run just before measured them, not in seconds: a read
# of 2 s was about four times the whole plain answer where a step took 5 ms, charged in instalments of 9 steps a
# drafting cycle (``CatchUpDebt``: one cycle for every two tokens left), and a draft of 8 tokens nearly paid them; where
# the steps took 8 ms (a CI machine on a slow day) it paid, and the drafter was asked 22 times. Steps measured when the
# module started would drift with a minute that runs slower.
DEAR_STEPS = 40  # an expensive catch-up after the prompt's
STALL_STEPS = 80  # a scheduler stall: 100 ms of a target stepping in 1.3 ms


class DearCatchUp(OracleDrafter):
    """Knows the target's future text; priced in plain steps of ``step`` seconds, reading the prompt costs
    ``prompt_steps`` of them, every later catch-up ``cycle_steps``."""

    name = "dear-catch-up"

    def __init__(self, future: bytes, step: float, prompt_steps: float, cycle_steps: float = 0.0) -> None:
        super().__init__(future)
        self.step = step
        self.prompt_s, self.cycle_s = prompt_steps * step, cycle_steps * step
        self.read_prompt = False
        self.proposals = self.reads = 0

    def begin(self, context: DraftContext) -> None:
        super().begin(context)
        self.read_prompt = False

    def prepare(self, source: str = "any") -> None:
        self.reads += 1
        time.sleep(self.cycle_s if self.read_prompt else self.prompt_s)
        self.read_prompt = True

    def propose(self, max_tokens: int) -> Draft:
        self.proposals += 1
        return super().propose(max_tokens)

    def count_afresh(self) -> None:
        """What the cost check did before the generation is not counted."""
        self.proposals = self.reads = 0


class Stalled(DearCatchUp):
    """Cheap, but stopped by the scheduler for ``STALL_STEPS`` plain steps: once, in its third read of the
    generation (``read``), or in the first cycle of each length the gate asks for (``new-length``: inside the
    cycles the policy times, where each length's cost is first learned)."""

    name = "stalled"

    def __init__(self, future: bytes, step: float, prompt_steps: float, cycle_steps: float, *, where: str,
                 gate: ConvincedGate) -> None:
        super().__init__(future, step, prompt_steps, cycle_steps)
        self.where, self.gate = where, gate

    def prepare(self, source: str = "any") -> None:
        super().prepare(source)
        if self.where == "read" and self.reads == 3:
            self._stall()

    def propose(self, max_tokens: int) -> Draft:
        if self.where == "new-length" and self.gate.new_length:
            self._stall()
        return super().propose(max_tokens)

    def _stall(self) -> None:
        time.sleep(STALL_STEPS * self.step)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaTarget]:
    """A tiny model wide enough that a step (about 1.4 ms) dwarfs the loop's own work, and memory-bound (a pass over
    8 tokens costs about 2 steps): a drafter that is right and cheap pays here, so only its cost can stop it."""
    path = build_tiny_gguf(tmp_path_factory.mktemp("wide") / "wide-bpe.gguf", n_embd=512, n_layer=4)
    with LlamaTarget(path, TargetOptions(n_ctx=1024, n_gpu_layers=0)) as t:
        yield t


@pytest.fixture(scope="module")
def profile(target: LlamaTarget) -> VerifyProfile:
    return measure(target)


class ConvincedGate(GatedPolicy):
    """A gate sure the drafter is always right (a prior of 99% worth a thousand drafts), so that only what a cycle
    costs can stop it: the tiny model's gibberish is often tokenized differently when re-tokenized, so real
    acceptance here says nothing. The catch-up is charged in the loop, before any policy sees the cycle, so the
    triggers (the default policy) see the same cost through the same ``observe``. It keeps what it was told of
    each cycle: how many tokens it asked for (0 for a plain step) and what the cycle cost.

    It starts from the plain step the profile measured, as the first of the steps it settles on (the fastest of
    them): a first step the scheduler stalled (200 ms of a 5 ms target, now and then on a busy machine) would
    otherwise be its only yardstick while it drafts, and make every draft look cheap."""

    def __init__(self, profile: VerifyProfile) -> None:
        super().__init__(DRAFT_MAX, CycleCosts(profile), AcceptanceModel(prior=0.99, weight=1000.0),
                         model_misses=True)
        self.costs.observe(0, profile.spans[1])
        self.cycles: list[tuple[int, float]] = []
        self.asked: set[int] = set()  # the lengths asked for
        self.new_length = False  # whether this cycle's is asked for the first time

    def draft_length(self) -> int:
        k = super().draft_length()
        self.new_length = k > 0 and k not in self.asked
        self.asked.add(k)
        return k

    def observe(self, requested: int, drafted: int, accepted: int, cycle_seconds: float, source: str = "") -> None:
        self.cycles.append((requested, cycle_seconds))
        super().observe(requested, drafted, accepted, cycle_seconds, source)


def run(target: LlamaTarget, profile: VerifyProfile, prompt_steps: float, cycle_steps: float = 0.0,
        stalled: str | None = None) -> tuple[DearCatchUp, ConvincedGate]:
    """The drafter and the gate after one generation whose prompt read costs ``prompt_steps`` plain steps and every
    later catch-up ``cycle_steps``, the drafter ``stalled`` where given (``Stalled``)."""
    request = GenerationRequest(target.tokenizer.tokenize(PROMPT, add_special=True), BUDGET)
    plain = run_plain(target, request)
    now = plain.stats.generation_seconds / plain.stats.committed_tokens  # a plain step as taken this minute
    gate = ConvincedGate(profile)
    future = target.tokenizer.detokenize(plain.tokens)
    drafter = DearCatchUp(future, now, prompt_steps, cycle_steps) if stalled is None \
        else Stalled(future, now, prompt_steps, cycle_steps, where=stalled, gate=gate)
    # What the load-time check sees: a free drafter, which could pay on any profile.
    step = profile.spans[1]
    assert could_pay_on(profile, (measure_source(drafter, "model")[0] or 0.0) / step, DRAFT_MAX)
    drafter.count_afresh()
    finished, _, guard = run_spec(target, drafter, request, PROMPT, policy=gate, background=False)
    assert finished.tokens == plain.tokens  # whatever the policy decided
    guard.close()
    return drafter, gate


def test_a_drafter_whose_every_catch_up_is_dear_stops_being_asked(target: LlamaTarget,
                                                                   profile: VerifyProfile) -> None:
    """Each catch-up after the prompt's costs 40 of the target's steps (at 10, a 9-token draft nearly paid, and a
    slower minute made it pay): a cycle that drafts costs far more than the tokens it wins. The first draft is
    cheap (its catch-up read only the prompt, for free), so the gate drafts on for a few cycles; then it stops,
    and asks again only now and then: no more than three times in the rest of the answer.

    How many dear cycles it pays before it stops depends on the plain step, measured on a machine that may be busy
    (a measurement far above the estimate is first taken for a stall, and the estimate climbs by half each time), and
    the first dear read is taken for a stall, learned at the second: two, usually; four leave a margin. Later asks are
    probes with back-off, each at least twice as far from the one before, unless the machine stalls: two plain steps
    stalled by 100 ms raise the yardstick as the dear cycles raised the draft's estimate, and a draft looked worth one
    more try 13 cycles after a probe (a suite run of this session, reproduced with stalls injected)."""
    drafter, gate = run(target, profile, prompt_steps=0.0, cycle_steps=DEAR_STEPS)
    asks = [i for i, (requested, _) in enumerate(gate.cycles) if requested]
    assert len(asks) == drafter.proposals
    gaps = [b - a for a, b in pairwise(asks)]
    ramp = next((i for i, gap in enumerate(gaps) if gap >= FIRST_PROBE_AFTER), len(gaps)) + 1
    assert 2 <= ramp <= 5, (asks, gate.cycles)  # the cheap first draft, and at most four dear ones
    dear = DEAR_STEPS * drafter.step
    assert all(gate.cycles[i][1] >= dear for i in asks[1:]), gate.cycles  # every later catch-up was paid for
    assert len(asks) - ramp <= 3, asks


def test_a_drafter_whose_prompt_read_is_dear_stops_being_asked(target: LlamaTarget, profile: VerifyProfile) -> None:
    """Reading the prompt costs ten times the whole plain generation: the drafting cycles after it pay it off in
    instalments of 20 plain steps, and not even a draft of 8 tokens, all accepted, wins that back. Before the
    catch-up was charged at all, this drafter was asked every cycle."""
    drafter, _ = run(target, profile, prompt_steps=10.0 * BUDGET)
    assert drafter.proposals <= 6, drafter.proposals


def test_a_drafter_whose_catch_up_is_cheap_keeps_being_asked(target: LlamaTarget, profile: VerifyProfile) -> None:
    """The same drafter reading the prompt in a fifth of a plain step: the gate keeps asking it."""
    drafter, _ = run(target, profile, prompt_steps=0.2)
    assert drafter.proposals >= 12, drafter.proposals


@pytest.mark.parametrize("where", ["read", "new-length"],
                         ids=["a-catch-up-stalled", "each-length-s-first-cycle-stalled"])
def test_a_cheap_drafter_stalled_now_and_then_keeps_being_asked(target: LlamaTarget, profile: VerifyProfile,
                                                                where: str) -> None:
    """Stalls of 80 plain steps: one in the drafter's second catch-up (its third read, the prompt's being the first),
    or one in the first cycle of each length the gate asks for, its first try of one token included. Taken whole,
    either priced drafting at dozens of steps, and the gate never asked again in the answer (a suite run's failure:
    asked 5 times in 96 tokens). Counted as stalls, they cost the answer a cycle or two."""
    drafter, _ = run(target, profile, prompt_steps=0.2, stalled=where)
    assert drafter.proposals >= 12, drafter.proposals


class PerByteReader(OracleDrafter):
    """Knows the target's future text, and reads what it has not seen at ``per_byte`` seconds a byte."""

    name = "per-byte-reader"

    def __init__(self, future: bytes, per_byte: float) -> None:
        super().__init__(future)
        self.per_byte = per_byte
        self.unread = 0
        self.reads: list[int] = []  # bytes of each read

    def begin(self, context: DraftContext) -> None:
        super().begin(context)
        self.unread = len(context.content())

    def extend(self, committed: bytes) -> None:
        super().extend(committed)
        self.unread += len(committed)

    def prepare(self, source: str = "any") -> None:
        if self.unread:
            time.sleep(self.unread * self.per_byte)
            self.reads.append(self.unread)
        self.unread = 0


LONG_PROMPT = PROMPT * 30  # 360 bytes


@pytest.mark.parametrize(("prompt_steps", "asked"), [(3.0 * BUDGET, False), (0.2, True)],
                         ids=["prompt-read-three-answers-long", "prompt-read-a-fifth-of-a-step"])
def test_a_gate_from_the_engines_memory_asks_a_model_only_where_it_can_win_back_its_read(
        target: LlamaTarget, profile: VerifyProfile, prompt_steps: float, asked: bool) -> None:
    """Three answers in a row, each policy from one ``PolicyMemory`` (as an engine makes them), the drafter's cost
    and its read measured at load: where reading a prompt costs three times what the whole plain answer does, no
    answer can win it back, and the model is never asked (the gate tried it in each answer, once a probe or a first
    try came due); where it costs a fifth of a step, it is asked. The output equals plain decoding's either way."""
    request = GenerationRequest(target.tokenizer.tokenize(LONG_PROMPT, add_special=True), BUDGET)
    plain = run_plain(target, request)
    step = plain.stats.generation_seconds / plain.stats.committed_tokens
    drafter = PerByteReader(target.tokenizer.detokenize(plain.tokens), prompt_steps * step / len(LONG_PROMPT))
    measuring = GuardedDrafter(drafter, background=False)
    memory = PolicyMemory.measure(measuring, profile, DRAFT_MAX)
    measuring.close()
    assert memory.sources == ("model",)  # the load-time check lets it draft: it is free and always right
    drafter.reads.clear()
    for _ in range(3):
        finished, _, guard = run_spec(target, drafter, request, LONG_PROMPT,
                                      policy=memory.policy(None, None, DRAFT_MAX), background=False)
        guard.close()
        assert finished.tokens == plain.tokens
    assert bool(drafter.reads) == asked, drafter.reads
