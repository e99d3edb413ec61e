"""While the text copies earlier text, lookup's drafts are judged apart, and plain steps teach what the copy would
have drafted: for the triggers (``tests/test_trigger_policy.py``) and for the gate of lookup alone (here)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from ds4spec.backend.prompt import ChatMessage
from ds4spec.core.drafting import DraftContext
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.policy.copying import (
    COPY_WINDOW,
    LONG_COPY,
    RESUME_SPAN,
    SHORT_COPY_PRIOR,
    Copy,
    CopyWatch,
    LookupAcceptance,
    LookupGate,
)
from ds4spec.policy.cycle_costs import CycleCosts
from ds4spec.policy.memory import PolicyMemory
from ds4spec.policy.probing import FIRST_PROBE_AFTER, PROBE_SHARE
from ds4spec.policy.profile import VerifyProfile

# A pass over n tokens in plain steps on a compute-bound target (Q4_K_M on 2 cores): lookup pays only above about 0.85.
COMPUTE_BOUND = VerifyProfile({1: 1.0, 2: 1.96, 3: 2.61, 5: 4.51, 17: 5.98, 65: 19.0}, "measured")
FILE = (b'def grand_total(xs):\n    """The sum of the prices in xs, each rounded to cents, with the tax of the'
        b' region added."""\n    return round(sum(xs) * 1.2, 2)\n')


def _watch(answer: bytes, prompt: bytes = FILE) -> CopyWatch:
    watch = CopyWatch(LookupAcceptance())
    watch.begin(DraftContext(messages=(ChatMessage("user", "Rename it in:\n" + prompt.decode()),)))
    watch.extend(answer)
    return watch


@pytest.mark.parametrize(("answer", "copy"), [
    (FILE[1:COPY_WINDOW], "none"),  # too short to tell
    (FILE[:COPY_WINDOW], "short"),  # the prompt's text
    (b"```python\n" + FILE[:40], "short"),
    (FILE[:LONG_COPY], "long"),
    (b"def total(prices):\n    return", "none"),  # new text
    # The answer repeating itself: lookup's drafts there were right with alpha 0.61 to 0.74, against 0.96 in a copy
    # of the prompt (scripts/lookup_replay.py), and one drew a rejected 15-token draft on HumanEval.
    (b"x = compute(a, b) + 1\n" * 2, "none"),
])
def test_the_text_is_copying_when_its_last_bytes_occur_in_the_prompt(answer: bytes, copy: Copy) -> None:
    assert _watch(answer).look() == copy


@pytest.mark.parametrize(("opening", "chat", "copy"), [
    (b"```", True, "short"),  # the fence of the prompt's file: an edit of it
    (FILE[:8], True, "short"),  # the file's first line, unfenced
    (b"``", True, "none"),  # too short to tell
    (b"ef gra", True, "none"),  # not where a line of the prompt starts
    (b"The sum", True, "none"),  # in the prompt, but not at the start of a line
    (b"```", False, "none"),  # a completion goes on with its prompt's line: its window must fill first
])
def test_a_chat_answer_that_opens_as_a_line_of_its_prompt_is_copying_from_its_first_bytes(
    opening: bytes, chat: bool, copy: Copy
) -> None:
    """An edit's answer opens with the fence of the file it repeats: judged as new text until 16 bytes were written,
    the F16 pair's triggers asked the model there, which first read the whole prompt (1.6 to 2.6 plain steps) for a
    draft of 1 or 2 tokens, where lookup alone went on with the file (run 66)."""
    prompt = b"Rename it in:\n\n```python\n" + FILE + b"```"
    watch = CopyWatch(LookupAcceptance())
    context = DraftContext(messages=(ChatMessage("user", prompt.decode()),)) if chat else DraftContext(text=prompt)
    watch.begin(context)
    watch.extend(opening)
    assert watch.look() == copy


@pytest.mark.parametrize(("answer", "figure"), [
    (b"```", "short_copy"),  # an answer opening as its prompt's fenced file: an edit, though markdown's prose
    (b"Because the sum is", "quote"),  # a prose answer quoting its question a window long: a quote
])
def test_in_prose_an_answer_s_opening_copy_is_judged_as_a_copy_and_a_later_one_as_a_quote(
    answer: bytes, figure: str
) -> None:
    """Judged by the quotes' figure, the F16 pair's triggers drafted an edit's opening fence 3 or 4 tokens at a time,
    where lookup alone drafted the fence and the file's first line in one pass of 10 or 11 tokens (run 67)."""
    prompt = b"Because the sum is wrong, rename it in:\n\n```python\n" + FILE + b"```"
    watch = CopyWatch(LookupAcceptance())
    watch.begin(DraftContext(messages=(ChatMessage("user", prompt.decode()),)))
    watch.extend(answer)
    assert watch.look(prose=True) == "short"
    assert watch.figure() is getattr(watch.acceptance, figure)


def test_where_a_copy_broke_at_an_edited_name_lookup_is_judged_as_resuming_it_for_a_few_bytes() -> None:
    """Lookup resumes a copy after an edited identifier (ds4spec.drafters.lookup); judged as new text there, the
    triggers asked the model, and lookup's figure was new code's."""
    watch = _watch(FILE[:4])
    watch.extend(FILE[4:24])
    assert watch.look() == "short"
    watch.extend(b"cents_")  # the edited name, in a commit that first went on with the copy: the break is there
    assert watch.look() == "resume" and watch.figure() is watch.acceptance.resuming
    assert watch.look(prose=True) == "none"  # a prose answer's own words resume where a quote ends
    watch.extend(b"x" * (RESUME_SPAN - len(b"cents_")))
    assert watch.look() == "resume"
    watch.extend(b"x")
    assert watch.look() == "none" and watch.figure() is watch.acceptance.fresh


def test_a_draft_that_copied_before_it_broke_moves_the_break_to_where_it_broke() -> None:
    """A copy seen at a cycle's start goes on through the bytes its draft committed: the break is where they leave
    it, not where the cycle began."""
    watch = _watch(FILE[:COPY_WINDOW])
    assert watch.look() == "short"
    watch.extend(FILE[COPY_WINDOW:90] + b"gross" + b"y" * (RESUME_SPAN - len(b"gross")))  # a long draft, then an edit
    assert watch.look() == "resume"
    watch.extend(b"y")
    assert watch.look() == "none"


def test_a_copy_is_sure_once_the_answer_has_copied_a_long_run_and_stays_so_after_an_edit() -> None:
    """In the replay, short copies after a long one were right with alpha 0.98 (edits); before any, 0.90 on edits
    and 0.64 to 0.75 on prose."""
    watch = _watch(b"")
    for at in range(0, LONG_COPY, 8):
        watch.extend(FILE[at : at + 8])
        assert watch.look() == ("short" if at + 8 < LONG_COPY else "long")  # the first 8 bytes: the file's opening
    watch.extend(b"cents_total")  # the edited name: new text, where lookup resumes the copy
    assert watch.look() == "resume"
    watch.extend(FILE[88:88 + COPY_WINDOW])
    assert watch.look() == "long"
    watch.begin(DraftContext(text=FILE))  # the next answer starts unsure again
    watch.extend(FILE[:COPY_WINDOW])
    assert watch.look() == "short"


@pytest.mark.parametrize("copied", [28, 85])  # a short copy; a long one
@pytest.mark.parametrize(("written", "moves"), [(b"The", "up"), (b"This", "down")])
def test_a_plain_step_while_copying_scores_what_the_copy_said_comes_next(
    copied: int, written: bytes, moves: str
) -> None:
    watch = _watch(b"")
    for at in range(0, copied, 7):
        watch.extend(FILE[at : min(at + 7, copied)])
        watch.look()
    assert FILE[copied : copied + 3] == (b"The" if copied == 28 else b"the")
    written = written if copied == 28 else written.lower()
    copying = watch.acceptance.model(watch.look())
    others = [m for m in (watch.acceptance.copying, watch.acceptance.short_copy, watch.acceptance.fresh)
              if m is not copying]
    before = copying.alpha, [m.alpha for m in others]
    watch.extend(written)
    after = copying.alpha
    assert (after > before[0]) if moves == "up" else (after < before[0])
    assert [m.alpha for m in others] == before[1]  # untouched


def test_a_short_copys_acceptance_starts_from_its_prior_in_each_answer() -> None:
    """A prose answer's quotes of its question are no guide to the next answer's copy of an edited file."""
    acceptance = LookupAcceptance()
    for _ in range(5):
        acceptance.short_copy.observe(8, 0)
        acceptance.copying.observe(8, 8)
    acceptance.carry_over()
    assert acceptance.short_copy.alpha == SHORT_COPY_PRIOR and acceptance.copying.alpha > 0.95


def test_a_short_copys_first_token_is_learned_apart_from_its_later_ones() -> None:
    """Replayed over 116 answers (scripts/lookup_replay.py), a copy of 16 to 31 bytes had its first token kept 0.68 of
    the time on HumanEval and its later ones 0.90. A draft rejected at its first token, or a plain step where the
    copy's next bytes were wrong, says the copy broke where it began: the figure that sets a draft's length is not
    moved by it."""
    watch = _watch(FILE[:28])
    figure = watch.acceptance.short_copy
    assert watch.look() == "short"
    figure.observe(3, 0)
    assert figure.first < SHORT_COPY_PRIOR == figure.alpha
    watch.extend(b"A su")  # the copy said "The sum"
    assert figure.first < 0.5 and figure.alpha == SHORT_COPY_PRIOR
    figure.observe(8, 8)
    assert figure.alpha > SHORT_COPY_PRIOR


def test_a_drafting_cycle_scores_nothing_itself() -> None:
    """Its verify pass judges the draft; the policy teaches lookup's acceptance from that."""
    watch = _watch(FILE[:28])
    before = watch.acceptance.short_copy.alpha
    assert watch.look() == "short"
    watch.drafting()
    watch.extend(b"The sum")
    assert watch.acceptance.short_copy.alpha == before


def _gate() -> LookupGate:
    """The gate of lookup alone after an answer of new code where its every draft was rejected, then a second answer
    that copied its prompt up to the docstring's text."""
    gate = LookupGate(16, CycleCosts(COMPUTE_BOUND), LookupAcceptance())
    gate.begin(DraftContext(text=b""))
    gate.observe(0, 0, 0, 1.0)
    for _ in range(30):
        k = gate.draft_length()
        gate.observe(k, k, 0, 1.0 + 0.3 * k) if k else gate.observe(0, 0, 0, 1.0)
    gate.begin(DraftContext(messages=(ChatMessage("user", "Rename total in:\n" + FILE.decode()),)))
    gate.extend(FILE[:28])
    return gate


def test_lookup_alone_drafts_a_copy_after_an_answer_that_taught_its_drafts_in_new_code_fail() -> None:
    gate = _gate()
    assert gate.lookup.fresh.alpha < 0.3
    assert gate.draft_length() > 0


def test_plain_steps_through_a_copy_bring_lookup_alone_back_after_rejections_at_an_edit() -> None:
    """Measured with one alpha for both: lookup alone took 120 cycles for the first edit's 126 tokens after
    HumanEval in three runs of four (Q4_K_M)."""
    gate, at = _gate(), 28
    for _ in range(20):  # rejected drafts, until the copy's figure says none pays
        if not (k := gate.draft_length()):
            break
        gate.observe(k, k, 0, 1.0 + 0.3 * k)
        gate.extend(FILE[at : at + 1])
        at += 1
    assert k == 0
    steps = 0
    while (k := gate.draft_length()) == 0 and steps < 20:
        gate.observe(0, 0, 0, 1.0)
        gate.extend(FILE[at : at + 3])
        at, steps = at + 3, steps + 1
    assert 0 < steps <= 3 and k > 0


def test_a_lookup_drafter_alone_gets_the_lookup_gate_and_a_hybrid_one_that_learns_its_model_apart() -> None:
    flat = VerifyProfile({1: 1.0, 2: 1.05, 65: 2.0}, "measured")
    alone = PolicyMemory(flat, LookupDrafter.sources)
    policy = alone.policy(None, None, 16)
    assert isinstance(policy, LookupGate) and not policy.lookup_alone and not policy.charges_reading
    hybrid = PolicyMemory(flat, ("lookup", "model"))
    policy = hybrid.policy(None, None, 16)
    assert isinstance(policy, LookupGate) and policy.lookup_alone and policy.charges_reading
    assert policy.model_acceptance is hybrid.gate_acceptance and policy.lookup is hybrid.gate_lookup


# A pass over n tokens in plain steps, Q4_K_M on a 2-core AVX-512 machine (the bench's verify profile): a rejected
# 16-token draft costs about nine plain steps.
STEEP = VerifyProfile({1: 1.0, 2: 1.90, 3: 2.66, 4: 3.33, 6: 4.80, 8: 7.48, 12: 9.32, 16: 9.27, 24: 13.25}, "measured")


def test_one_accepted_draft_in_a_short_copy_does_not_send_a_whole_line_where_a_miss_is_dear() -> None:
    """A short copy's first drafts finish the line being copied; the next line is where an edit changes it. Held as
    lightly as a gate's prior, one accepted draft of 2 or 3 tokens sent the next one 14 to 24 tokens long, rejected
    at once in 7 of 10 edit answers (Edit/5 to /9, AVX-512, Q4_K_M)."""
    gate = LookupGate(64, CycleCosts(STEEP), LookupAcceptance())
    gate.begin(DraftContext(messages=(ChatMessage("user", "Rename total in:\n" + FILE.decode()),)))
    gate.observe(0, 0, 0, 1.0)  # the yardstick: a plain step
    gate.extend(FILE[:28])
    assert 0 < gate.draft_length() <= 4 and gate.copies.copy == "short"
    gate.observe(3, 3, 3, STEEP.ratio(3))  # its draft: 3 tokens, all accepted
    gate.extend(FILE[28:36])
    assert 0 < gate.draft_length() <= 4 and gate.copies.copy == "short"


def _lookup_gate_probes(profile: VerifyProfile, cycles: int = 400) -> list[int]:
    """The cycles at which lookup alone drafts in new text where its every draft is rejected, each cycle costing what
    ``profile`` says its pass costs."""
    gate = LookupGate(16, CycleCosts(profile), LookupAcceptance())
    gate.begin(DraftContext(text=b""))
    gate.observe(0, 0, 0, 1.0)
    drafted = []
    for cycle in range(cycles):
        k = gate.draft_length()
        if k:
            drafted.append(cycle)
        gate.observe(k, k, 0, profile.ratio(k))
    return drafted


@pytest.mark.parametrize(("profile", "gap"), [
    (STEEP, (STEEP.ratio(1) - 1) / PROBE_SHARE),  # a rejected one-token probe loses 0.9 plain steps
    (VerifyProfile({1: 1.0, 2: 1.15, 3: 1.3, 5: 1.6, 17: 3.6}, "measured"), FIRST_PROBE_AFTER),  # F16-like: 0.15
], ids=["compute-bound", "memory-bound"])
def test_lookup_alones_probes_in_new_text_are_spaced_by_what_a_rejected_one_costs(profile: VerifyProfile,
                                                                                  gap: float) -> None:
    """Counted as costing nothing, lookup's probes in new text (HumanEval, prose: its matches mostly wrong) came every
    8, 16, 32 cycles of each answer; on a compute-bound target each rejected one loses 0.9 plain steps. Where a pass
    over two tokens costs little more than a step, they stay as frequent."""
    probes = _lookup_gate_probes(profile)
    lulls = [b - a for a, b in pairwise(probes) if b > a + 1]  # back to back: drafts while the figure still paid
    assert len(lulls) >= 3 and min(lulls) >= gap and lulls[0] < 2 * gap, probes
