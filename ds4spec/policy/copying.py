"""Whether the text is copying its prompt, and what lookup's drafts are worth there and elsewhere.

While the text's last ``COPY_WINDOW`` bytes occur in the prompt, lookup's next draft goes on with that copy, and
whether it is right hardly depends on the answer. Replayed over the target's own answers to 51 prompts not in the
bench (Q4_K_M, 16-token drafts, ``scripts/lookup_replay.py``), lookup's drafts had alpha 0.96 there on edits and on
HumanEval alike, against 0.93 on edits and 0.45 on HumanEval and prose elsewhere. Where the answer repeats its own
earlier text instead, alpha was 0.61 to 0.74: counted as copying, one such repeat in a HumanEval answer drew a
rejected 15-token draft, 3.5 plain steps lost (Q4_K_M). So lookup's acceptance is learned apart for the two
(``LookupAcceptance``). Learned as one, two wrong drafts at an edit's changed line, in an answer after HumanEval,
took lookup out for dozens of cycles of the copy (Q4_K_M files: triggers 1.77x against lookup's 2.04x in one run).

A plain step while the text is copying still teaches (``CopyWatch.extend``): the bytes the copy says come next are
checked against what the target wrote, a one-token draft of lookup's that cost nothing. Without it, once wrong drafts
at an edit had taken lookup out, only probes (after 8, 16, 32 cycles) brought it back, and the rest of a copied
docstring went by in plain steps (Q4_K_M edits: 79 cycles for 95 tokens, lookup alone 16).

A copy is less sure before it has gone on for ``LONG_COPY`` bytes in the answer (``Copy``). In the same replay, where
the answer's last 16 to 63 bytes occurred in the prompt and the answer had not yet copied a longer run, lookup's
drafts were right with alpha 0.90 on edits and 0.64 to 0.75 on prose (an answer quoting a few words of its question),
against 0.95 to 0.98 in or after a long copy. Learned as one, the edits' long copies sent the prose answers' quotes
16-token drafts (Q4_K_M: one with 1 token accepted, then one of 9 with none, about 13 plain steps lost in a 128-token
answer). So a short copy's acceptance is learned apart too, from a prior each answer, and the plain steps of a quote
that goes on teach it, as they do a long copy's. The replay's 0.90 is held as ``SHORT_COPY_WEIGHT`` drafts: a short
copy's first drafts finish the line being copied far more often than a draft goes on right through the next line,
where an edit changes it. Held as lightly as a gate's prior (2 drafts), one accepted draft of 2 or 3 tokens raised the
figure to 0.95, and on a compute-bound target (Q4_K_M on a 2-core AVX-512 machine: a pass over 16 tokens costs 9.3
plain steps) the next draft was 14 to 24 tokens, rejected at once in 7 of 10 edit answers, lookup alone and the
triggers alike. Held as 8 drafts, short copies are drafted a few tokens at a time until a long copy takes over: on
that machine, prompts 6 to 10, edits went from 1.43x to 1.93x for lookup alone and from 1.38x to 1.89x for the
triggers, files from 1.57x to 1.65x and from 1.46x to 1.73x (``docs/benchmarks.md``, run 37).

A short copy's first token is kept less often than its later ones, once that first one held: replayed over the target's
answers to 116 prompts (``scripts/lookup_replay.py``, Q4_K_M, 16-token drafts, run 71), where the copy had gone on for
16 to 31 bytes its first token was kept 0.68 of the time on HumanEval and its later ones 0.90 (0.90 and 0.96 at 32 to 63
bytes); on edits and files both 0.89 to 0.95. So its figure is two (``DraftAcceptance``): a draft rejected at its first
token says the copy broke where it began, not that the copy's next tokens are wrong, and a plain step's check of the
copy's next bytes teaches only the first token's figure. The later tokens' figure, which sets how long a draft is, is
held as ``SHORT_COPY_WEIGHT`` drafts; the first token's as a gate's prior (2 drafts), so that an answer that rewords its
prompt stops drafting its copies after a few rejections. Learned as one, each such rejection shortened the next drafts
of the copies that held (the edits' and files' short copies: 245 drafts of 6.0 tokens on average, against 186 of 8.6
with the split). Replayed over the same answers with each cycle priced by a verify profile
(``scripts/policy_replay.py``: the triggers with lookup alone, learning from answer to answer): on the 2-core AVX-512
machine's profile edits went from 2.43x to 2.56x and files from 2.82x to 2.89x after HumanEval's answers, HumanEval from
1.026x to 1.028x; on the AMD EPYC machine's, edits from 1.81x to 1.93x, files from 1.94x to 2.09x; on its memory-bound
F32 profile, within 2% either way (run 71's records).

A short copy in prose (a quote of the question) starts from its own prior, where the policy knows it is prose (the
triggers): at the edits' prior, 0.9, the default pair's triggers sent prose quotes drafts of 2 to 15 tokens, 21 to 46
tokens in five answers at 22 to 38% accepted (0.91x and 0.96x, where lookup alone ran at 1.01x). At the replay's
0.7, a compute-bound target (a pass over 2 tokens costing 1.6 plain steps) does not draft a quote before one teaches
otherwise, and a memory-bound one does. A long quote has the quote's figure too: a prose answer's own words resume
where the quote ends, wherever an edited file's copy went on. At the figure of the edits' long copies (0.999, carried
from the answers before), the default pair's triggers sent the end of a 64-byte quote a 26-token draft, rejected at
its first token (Q4_K_M, 2-core AVX-512: a pass costing about 14 plain steps, a tenth of the answer's time).

Outside copies, prose has its own figure too. Lookup's drafts there are matches of a few common words; outside copies
in the edits' code they go on with the file (the replay's 0.93). Carried from the edits, that figure priced lookup's
next match in a prose answer at 9 tokens, preferred to a model that paid there: the F16 pair's triggers then asked
lookup alone for the rest of the answer, which found few matches and fewer right ones (run 52, traced: after the
edits, the second prose answer's model drafted 4 times, lookup 9 tokens at a time for the 118 cycles left, 5 of its
32 drafted tokens accepted, where the answer before had the model drafting 47 tokens in 49 cycles).

A chat answer's first bytes are too few for the window, yet an answer that opens as one of its prompt's lines does (a
code fence: the edit of a fenced file) is copying from its first token; judged as new text, the F16 pair's triggers
asked the model there, which first read the whole prompt with its file (270 to 450 ms, 1.6 to 2.6 plain steps, for a
draft of 1 or 2 tokens), where lookup alone went on with the file (run 66). So while a chat answer is shorter than the
window, it counts as copying where the prompt holds it at the start of a line (``OPENING``). Such an opening is no
quote, though the answer's markdown is prose until its fence opens: judged by the quotes' figure (0.7), the F16 pair's
triggers drafted an edit's opening fence 3 or 4 tokens at a time and its first code line apart, where lookup alone,
by the short copies' figure, drafted both in one pass of 10 or 11 tokens (run 67).

In code, an answer's comment that repeats a few words of its prompt's docstring rewords it: unseen HumanEval answers
wrote "# Find the longest" after a docstring's "Find the longest postfix", "# Sort the list of numbers" after "From a
supplied list of numbers", and went on in words of their own. Judged as short copies (the edits' 0.9), each drew a first
draft of 11 to 15 tokens rejected at its first token: replayed over 56 HumanEval answers (AMD EPYC, the default pair's
profile, a fresh policy each, run 75), HumanEval/20 ran at 0.95x and /59 at 0.98x, and 0.98x and 1.00x judged as quotes
(by ``QUOTE_PRIOR``, learned from plain steps as a prose quote's is), with edits, files and prose unchanged; with the
Intel AVX-512 machine's profile HumanEval went from 1.024x to 1.026x, with AVX2-only kernels' from 1.015x to 1.013x. A
comment that repeats a comment of the prompt copies it (HumanEval/38: a function's comment, then its code, 95 of 114
drafted tokens kept), so the owner who knows the syntax (the triggers) compares the answer's event with that of the
prompt's line where the copy is (``CopyWatch.reworded``). Docstring and string events are left copies: an edited file's
doctest lines, read alone, are code, and judged as rewordings every literal cost edits 1 to 2% in the same replay;
strings alone cost files 1%.

And where a copy broke (an edited name), the text is new only for a few bytes: lookup resumes the copy after the
edited identifier (``ds4spec.drafters.lookup``). Judged as new text, those cycles went to the model too (the same
trace: the code after each renamed name, about 1 plain step lost an edit), and lookup's figure there was new text's,
which HumanEval's wrong matches had set. So for ``RESUME_SPAN`` bytes after the text last went on with its copy,
outside prose, lookup's drafts are judged by a figure of their own (``resume``), held as a copy's is.
"""

from __future__ import annotations

from typing import Literal

from ds4spec.core.drafting import DraftContext
from ds4spec.policy.acceptance import Acceptance, AcceptanceModel, DraftAcceptance
from ds4spec.policy.confidence import ConfidenceCalibration
from ds4spec.policy.cycle_costs import CycleCosts
from ds4spec.policy.gate import CARRIED_TRIALS, GatedPolicy
from ds4spec.policy.reading import ModelReading, shared_prefix

COPY_WINDOW = 16  # bytes; with 8, HumanEval's new code matched often and wrongly (alpha 0.33), 12 did as well as 16
LONG_COPY = 64  # bytes copied in one run, now or earlier in the answer, after which a copy is sure
SHADOW_BYTES = 8  # of the copy's continuation, checked against a plain step's token
COPYING_PRIOR = 0.9  # before any draft while copying: what the replay measured, lightly held
SHORT_COPY_PRIOR = 0.9  # each answer's first short copy: edits' and HumanEval's
SHORT_COPY_WEIGHT = 8.0  # drafts' worth the replay's figure is held as, each answer (docstring)
QUOTE_PRIOR = 0.7  # each answer's first short copy in prose: the replay's 0.64 to 0.75
OPENING = 3  # bytes of a chat answer that must open a line of its prompt for the answer to be seen copying (a fence)
RESUME_SPAN = 64  # bytes after the text last went on with a copy of the prompt, in which lookup resumes it
# Lookup's drafts where a copy broke, before any: lookup alone's drafts after the five edits' renamed names kept 25 of
# their 36 tokens (F16 pair, run 66).
RESUME_PRIOR = 0.75
# Carried into the next generation, as this many drafts: while copying, alpha is a property of lookup, so it is held
# as the gate holds its own; elsewhere it is a property of the answer (does it copy its input?) and held lightly:
# carried for longer, HumanEval's wrong copies kept the next edits from lookup's first tries (Q4_K_M edits: triggers
# 1.66x against lookup's 1.88x in one run).
COPYING_CARRIED = 6.0
FRESH_CARRIED = 2.0

# Where the answer's last COPY_WINDOW bytes are: nowhere in the prompt; in it, a copy that has not yet gone on for
# LONG_COPY bytes in this answer; in it, in or after such a copy; nowhere, but within RESUME_SPAN bytes of where the
# text last went on with a copy (outside prose).
Copy = Literal["none", "short", "long", "resume"]


def short_copy_acceptance() -> DraftAcceptance:
    """A short copy's figure, each answer: its first tokens' and its later ones' apart (module docstring)."""
    return DraftAcceptance(AcceptanceModel(SHORT_COPY_PRIOR),
                           AcceptanceModel(SHORT_COPY_PRIOR, SHORT_COPY_WEIGHT))


class LookupAcceptance:
    """Lookup's acceptance, apart in a long copy of the prompt, a short one, a quote (a copy in prose), just after a
    copy broke, and elsewhere."""

    def __init__(self) -> None:
        self.copying = AcceptanceModel(COPYING_PRIOR)  # in or after a long copy
        self.short_copy = short_copy_acceptance()
        self.quote = AcceptanceModel(QUOTE_PRIOR)
        self.resuming = AcceptanceModel(RESUME_PRIOR)
        self.fresh = AcceptanceModel()
        self.fresh_prose = AcceptanceModel()  # elsewhere in prose (module docstring)

    def model(self, copy: Copy, prose: bool = False, rewording: bool = False) -> Acceptance:
        if prose or rewording:
            return self.quote if copy in ("short", "long") else self.fresh_prose
        if copy == "short":
            return self.short_copy
        if copy == "resume":
            return self.resuming
        return self.copying if copy == "long" else self.fresh

    def carry_over(self) -> None:
        self.copying.carry_over(COPYING_CARRIED)
        self.resuming.carry_over(COPYING_CARRIED)
        self.short_copy = short_copy_acceptance()
        self.quote = AcceptanceModel(QUOTE_PRIOR)
        self.fresh.carry_over(FRESH_CARRIED)
        self.fresh_prose.carry_over(FRESH_CARRIED)


class CopyWatch:
    """Follows one answer: whether its end repeats the prompt (``look``, a search of a few kilobytes: microseconds),
    and, after a plain step decided while it did, whether the target wrote what the copy said (``extend``)."""

    def __init__(self, acceptance: LookupAcceptance) -> None:
        self.acceptance = acceptance
        self.copy: Copy = "none"  # at the last ``look``
        self.prose = False  # whether the text at the last ``look`` is prose, where its owner knows (the triggers)
        self.rewording = False  # whether a short copy there rewords the prompt, where its owner knows (``reworded``)
        self._source = b""
        self._chat = False  # a chat answer, which opens a line; a completion goes on with its prompt's
        self._tail = b""  # the answer's last LONG_COPY bytes
        self._written = 0  # bytes of the answer
        self._copied_long = False  # whether the answer has copied LONG_COPY bytes of the prompt in one run
        self._next = b""  # what the copy says comes next, while a plain step is pending
        self._from: int | None = None  # where in the prompt the copy seen at the last ``look`` goes on
        self._copied_to: int | None = None  # the answer's length where it last went on with a copy

    def begin(self, context: DraftContext) -> None:
        self._source = context.content()
        self._chat = context.text is None
        self._tail = b""
        self._written = 0
        self._copied_long = False
        self.copy, self._next = "none", b""
        self._from = self._copied_to = None

    def look(self, prose: bool = False) -> Copy:
        """Whether and how far the text now repeats the prompt; remembers what followed there, for ``extend``."""
        self.prose, self.rewording = prose, False
        window = self._tail[-COPY_WINDOW:]
        at = self._find(window)
        if at < 0:
            near = self._copied_to is not None and self._written - self._copied_to <= RESUME_SPAN
            self.copy = "resume" if near and not prose else "none"
            self._next, self._from = b"", None
            return self.copy
        if not self._copied_long and len(self._tail) == LONG_COPY:
            self._copied_long = self._tail in self._source
        self.copy = "long" if self._copied_long else "short"
        self.prose = prose and len(window) == COPY_WINDOW  # an answer opening as a line of its prompt is no quote
        self._from = at + len(window)
        self._copied_to = self._written
        self._next = self._source[self._from : self._from + SHADOW_BYTES]
        return self.copy

    def _find(self, window: bytes) -> int:
        """Where ``window`` (the answer's last bytes) starts in the prompt, or -1: a full window anywhere; a chat
        answer shorter than that, at the start of one of the prompt's lines (``OPENING``)."""
        if len(window) == COPY_WINDOW:
            return self._source.find(window)
        if not self._chat or len(window) < OPENING or len(window) != self._written:
            return -1
        at = self._source.find(b"\n" + window)
        return at + 1 if at >= 0 else (0 if self._source.startswith(window) else -1)

    def figure(self) -> Acceptance:
        """Lookup's acceptance where the text was at the last ``look``."""
        return self.acceptance.model(self.copy, self.prose, self.rewording)

    def matched_line(self) -> bytes:
        """The prompt's line where the copy seen at the last ``look`` is, up to the answer's end: what the answer's
        last bytes repeat, with what precedes them on that line."""
        if self._from is None:
            return b""
        return self._source[self._source.rfind(b"\n", 0, self._from - 1) + 1 : self._from]

    def reworded(self, rewording: bool) -> None:
        """Judges the short copy seen at the last ``look`` as a quote where ``rewording`` (module docstring)."""
        self.rewording = rewording and self.copy == "short"

    def drafting(self) -> None:
        """This cycle drafts: its outcome teaches lookup's acceptance, if lookup drafted, through the policy."""
        self._next = b""

    def extend(self, committed: bytes) -> None:
        """After a plain step decided while copying, scores the copy's next bytes against the target's; follows the
        copy seen at the last ``look`` through what was committed, to where it broke."""
        if self._next and committed:
            n = min(len(committed), len(self._next))
            self.figure().observe(1, int(committed[:n] == self._next[:n]))
        self._next = b""
        if self._from is not None:
            ahead = self._source[self._from : self._from + len(committed)]
            same = shared_prefix(ahead, committed)
            self._copied_to = self._written + same
            self._from = self._from + same if same == len(committed) else None
        self._written += len(committed)
        self._tail = (self._tail + committed)[-LONG_COPY:]


class LookupGate(GatedPolicy):
    """The gate for lookup: its acceptance learned apart while the text copies, plain steps there teaching it.
    Measured with one alpha for both, lookup alone took 120 cycles for the first edit's 126 tokens after HumanEval in
    three runs of four, and 34 in the other (Q4_K_M). With ``model_acceptance``, the gate for a hybrid drafter: lookup,
    then its model where lookup has no match, where the model's drafts pay (``GatedPolicy``, ``lookup_alone``). With
    lookup's figure learned as one, the default pair's hybrid gate ran its edits at 1.36x where lookup alone ran at
    1.69x (2-core AVX-512, the model asked)."""

    def __init__(self, draft_max: int, costs: CycleCosts, lookup: LookupAcceptance, source: str = "any", *,
                 model_acceptance: Acceptance | None = None, confidence: ConfidenceCalibration | None = None,
                 reading: ModelReading | None = None, model_token_seconds: float = 0.0) -> None:
        hybrid = model_acceptance is not None
        super().__init__(draft_max, costs, lookup.fresh, source=source, model_misses=hybrid, lookup_alone=hybrid,
                         model_acceptance=model_acceptance, confidence=confidence, reading=reading,
                         model_token_seconds=model_token_seconds)
        self.lookup = lookup
        self.copies = CopyWatch(lookup)

    def begin(self, context: DraftContext) -> None:
        super().begin(context)
        self.copies.begin(context)

    def _carry_over(self) -> None:
        self.lookup.carry_over()
        if self.lookup_alone:
            self.model_acceptance.carry_over(CARRIED_TRIALS)

    def extend(self, committed: bytes) -> None:
        self.copies.extend(committed)
        super().extend(committed)

    def draft_length(self) -> int:
        self.copies.look()
        self.acceptance = self.copies.figure()  # what ``observe`` teaches, too
        k = super().draft_length()
        if k:
            self.copies.drafting()
        return k

    def _probe_waste(self, k: int) -> float:
        """A rejected probe loses its pass less a plain step (and a model's read, where the model may be asked). Counted
        as none (a lookup miss costs nothing), lookup was probed every 8, 16, 32 cycles of each answer where its figure
        said no: outside a copy of the prompt its matches are mostly wrong (the replay's alpha 0.45 on HumanEval and
        prose), and in a copy plain steps teach its figure as a probe would (``CopyWatch.extend``). Measured on the
        default pair's prose and HumanEval (Q4_K_M, 2-core AVX-512: a pass over 2 tokens costs 1.9 plain steps), one to
        four rejected one-token probes an answer."""
        return max(self.costs.steps_lost(k), super()._probe_waste(k))
