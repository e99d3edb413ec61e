"""The text lookup drafter and the lookup-then-model hybrid: what they propose, and what that costs."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4spec.backend.prompt import ChatMessage
from ds4spec.core.drafting import CHECKED, NO_DRAFT, Draft, DraftContext, Drafter, Enough, Worth
from ds4spec.drafters.hybrid import HybridDrafter
from ds4spec.drafters.lookup import LookupDrafter

# Edit/0 of /work/shared/bench/edits.jsonl (derived from HumanEval/0, MIT licence), as the engine would see it.
EDIT_INSTRUCTION = (
    "Rename the function `has_close_elements` to `do_has_close_elements` everywhere in the code below, keep "
    "everything else unchanged, and reply with the complete updated code in one fenced block."
)
EDIT_CODE = '''from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ Check if in given list of numbers, are any two numbers closer to each other than
    given threshold.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)
    True
    """
    for idx, elem in enumerate(numbers):
        for idx2, elem2 in enumerate(numbers):
            if idx != idx2:
                distance = abs(elem - elem2)
                if distance < threshold:
                    return True

    return False
'''


def started(text: bytes, **options: float) -> LookupDrafter:
    drafter = LookupDrafter(**options)  # type: ignore[arg-type]
    drafter.begin(DraftContext(text=text))
    return drafter


def common_prefix(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def test_proposes_the_continuation_of_the_last_earlier_occurrence() -> None:
    drafter = started(b"alpha = compute(1)\nbeta = compute(2)\ngamma = comp")
    draft = drafter.propose(2)  # 2 tokens at 3.5 bytes each: 7 bytes
    assert draft == Draft(b"ute(2)\n", "lookup", 0, ())
    assert drafter.propose(100).text == b"ute(2)\ngamma = comp"  # never more than the text that exists


def test_prefers_the_longest_then_most_recent_match() -> None:
    # "app" last occurred in y.append, but "\nx.app" is longer and occurred only once, in the first line.
    assert started(b"\nx.append(1)\ny.append(2)\nx.app", min_match=3).propose(2).text == b"end(1)\n"
    # Equally long matches: the most recent one wins.
    assert started(b"\nx.append(1)\n\nx.append(2)\n\nx.app").propose(2).text == b"end(2)\n"


def test_the_longest_match_is_found_when_the_text_arrives_a_byte_at_a_time() -> None:
    """Text committed a token at a time is indexed as text read at once: the 20-byte suffix still picks the first
    line, whose last 5 and 10 bytes recur more recently in the second."""
    drafter = started(b"")
    for byte in b"one: the quick brown fox jumps\ntwo: xx brown fox jumps over\none: the quick brown fox jumps":
        drafter.extend(bytes([byte]))
    assert drafter.propose(2).text == b"\ntwo: x"


def test_proposes_nothing_without_a_match() -> None:
    assert started(b"abcdef").propose(8) is NO_DRAFT
    assert started(b"abab").propose(8) is NO_DRAFT  # shorter than min_match (5)
    assert started(b"abcabc").propose(0) is NO_DRAFT  # no budget
    fresh = started(b"def f(x):\n    return x\n")
    fresh.extend(b"qwz")
    assert fresh.propose(8) is NO_DRAFT


def test_never_matches_the_suffix_with_itself() -> None:
    assert started(b"a unique text").propose(8) is NO_DRAFT  # "ext" occurs only as the suffix itself
    assert started(b"aaaa", min_match=3).propose(8).text == b"a"  # the occurrence ending at 3: one existing byte
    assert started(b"abcabc", min_match=3).propose(8).text == b"abc"


def run_edit(step: int) -> tuple[float, LookupDrafter, int]:
    """Commits the renamed code piece by piece as the engine would: the matching prefix of each draft, then
    ``step`` bytes standing in for the target's own token. Returns the fraction of proposed bytes that were right."""
    answer = ("```python\n" + EDIT_CODE.replace("has_close_elements", "do_has_close_elements") + "```").encode()
    drafter = LookupDrafter()
    drafter.begin(DraftContext(messages=[ChatMessage("user", f"{EDIT_INSTRUCTION}\n\n```python\n{EDIT_CODE}```")]))
    proposed = right = cycles = pos = 0
    while pos < len(answer):
        draft = drafter.propose(16).text
        accepted = common_prefix(draft, answer[pos:])
        proposed, right, cycles = proposed + len(draft), right + accepted, cycles + 1
        drafter.extend(answer[pos : pos + accepted + step])
        pos += accepted + step
    return right / proposed, drafter, cycles


def test_resynchronises_after_a_renamed_identifier() -> None:
    fraction, drafter, cycles = run_edit(step=4)
    assert fraction > 0.85  # measured 0.93: the misses are the first renamed use and the closing fence
    assert cycles < 16  # for 622 bytes (measured 13)
    assert drafter.renames == {b"has_close_elements": b"do_has_close_elements"}
    assert run_edit(step=1)[0] > 0.75  # one byte per target token: more, shorter drafts (measured 0.83)


def test_applies_a_learned_rename_to_whole_identifiers_only() -> None:
    drafter = started(b"def ab(x):\n    return ab(x) + cab(x) + ab_2 + ab\n\n", min_match=3)
    drafter.extend(b"def ")
    assert drafter.propose(8).text.startswith(b"ab(x):")  # copying the function
    drafter.extend(b"do_ab(x):\n   ")  # the answer renamed it, then went on copying
    assert drafter.propose(16).text == b" return do_ab(x) + cab(x) + ab_2 + do_ab\n\ndef do_ab(x):\n"
    assert drafter.renames == {b"ab": b"do_ab"}  # learned when the copy resumed after the break


class CountingIndex(dict[bytes, int]):
    """A dict that counts the operations the drafter does on it."""

    ops = 0

    def __setitem__(self, key: bytes, value: int) -> None:
        CountingIndex.ops += 1
        super().__setitem__(key, value)

    def get(self, key: bytes, default: int | None = None) -> int | None:  # type: ignore[override]
        CountingIndex.ops += 1
        return super().get(key, default)


class CountingLookup(LookupDrafter):
    index_factory = CountingIndex


def ops_of(action: object) -> int:
    before = CountingIndex.ops
    action()  # type: ignore[operator]
    return CountingIndex.ops - before


def test_cost_per_extend_does_not_grow_with_the_text() -> None:
    drafter = CountingLookup()
    drafter.begin(DraftContext(text=EDIT_CODE.encode()))
    chunk = b"    value = compute(value, 17)\n"
    early = ops_of(lambda: drafter.extend(chunk))
    for i in range(2000):  # about 60 kB more
        drafter.extend(b"    v%d = compute(value, %d)\n" % (i, i))
    late = ops_of(lambda: drafter.extend(chunk))
    assert early == late == len(drafter.lengths) * len(chunk)
    assert ops_of(lambda: drafter.propose(16)) <= len(drafter.lengths)


def test_chat_mode_searches_the_message_contents() -> None:
    drafter = LookupDrafter()
    messages = [ChatMessage("system", "You edit code."), ChatMessage("user", "def area(r):\n    return 3.14 * r * r")]
    drafter.begin(DraftContext(messages=messages))
    assert drafter.text == b"You edit code.\ndef area(r):\n    return 3.14 * r * r\n"  # no roles, no markup
    drafter.extend(b"def area(r):\n    ret")
    assert drafter.propose(4).text == b"urn 3.14 * r *"  # 4 tokens of 3.5 bytes


class ScriptedModel(Drafter):
    """A test double for the hybrid's routing: proposes a fixed text and records what it was told."""

    name = "scripted"

    def __init__(self, proposal: bytes = b"MODEL") -> None:
        self.proposal = proposal
        self.contexts: list[DraftContext] = []
        self.committed = b""
        self.proposals = 0
        self.closed = False

    def begin(self, context: DraftContext) -> None:
        self.contexts.append(context)
        self.committed = b""

    def extend(self, committed: bytes) -> None:
        self.committed += committed

    def propose(self, max_tokens: int) -> Draft:
        self.proposals += 1
        return Draft(self.proposal, "model", drafter_tokens=max_tokens, confidences=(0.9,) * max_tokens)

    def close(self) -> None:
        self.closed = True


def test_hybrid_uses_lookup_when_it_matches_and_the_model_otherwise() -> None:
    model = ScriptedModel()
    hybrid = HybridDrafter(LookupDrafter(), model)
    assert hybrid.name == "hybrid(lookup+scripted)"
    hybrid.begin(DraftContext(text=b"print(x)\nprint(y)\npri"))
    assert hybrid.propose(2) == Draft(b"nt(y)\np", "lookup", 0, ())
    assert model.proposals == 0  # a lookup draft spends nothing on the model
    hybrid.extend(b"zqk")
    draft = hybrid.propose(3)
    assert (draft.text, draft.source, draft.drafter_tokens) == (b"MODEL", "model", 3)
    assert HybridDrafter(LookupDrafter(), ScriptedModel(b"")).propose(3) is NO_DRAFT


def test_hybrid_keeps_the_model_in_sync() -> None:
    model = ScriptedModel()
    hybrid = HybridDrafter(LookupDrafter(), model)
    context = DraftContext(messages=[ChatMessage("user", "x = 1\ny = 2\n")])
    hybrid.begin(context)
    pieces = [b"x = 1\n", b"y", b" = 2\n", b"z = 3"]
    sources = []
    for piece in pieces:
        sources.append(hybrid.propose(4).source)
        hybrid.extend(piece)
    assert sources == ["model", "lookup", "lookup", "lookup"]  # the model is told everything, drafting or not
    assert model.contexts == [context]
    assert model.committed == b"".join(pieces)
    assert hybrid.lookup.text.endswith(b"".join(pieces))  # type: ignore[attr-defined]

    class BrokenLookup(LookupDrafter):
        def close(self) -> None:
            raise RuntimeError("boom")

    closing = HybridDrafter(BrokenLookup(), model)
    with pytest.raises(RuntimeError):
        closing.close()
    assert model.closed


def test_a_hybrid_whose_model_will_never_be_asked_leaves_it_alone_from_the_next_generation() -> None:
    """The cost check ruled the model out: following the text would be its work for nothing (on a GPU, reading
    the text beside the target's passes)."""
    model = ScriptedModel()
    hybrid = HybridDrafter(LookupDrafter(), model)
    hybrid.begin(DraftContext(text=b"a = 1\n"))
    hybrid.follow_only(("lookup",))
    hybrid.extend(b"b")  # the generation under way goes on as it started
    assert model.committed == b"b"
    hybrid.begin(DraftContext(text=b"print(x)\nprint(y)\npri"))
    assert hybrid.propose(2) == Draft(b"nt(y)\np", "lookup", 0, ())  # lookup drafts as before
    hybrid.extend(b"zqk")
    hybrid.prepare("model")
    assert len(model.contexts) == 1 and model.committed == b"b"
    assert hybrid.propose(3) is NO_DRAFT  # no match, and the model is not asked
    assert hybrid.propose_from("model", 3) is NO_DRAFT
    assert hybrid.propose_until(3, lambda text: True) is NO_DRAFT
    assert model.proposals == 0
    hybrid.follow_only(("lookup", "model"))
    hybrid.begin(DraftContext(text=b"zqk"))
    assert hybrid.propose(3).source == "model" and len(model.contexts) == 2


def renamed_reference(text: bytes, start: int, renames: dict[bytes, bytes]) -> bytes:
    """Independent of the drafter: the text from ``start`` with whole identifiers (of the whole text) renamed."""
    out, last = bytearray(), start
    for m in re.finditer(rb"\w+", text):
        if m.start() >= start and m.group() in renames:
            out += text[last : m.start()] + renames[m.group()]
            last = m.end()
    return bytes(out + text[last:])


def is_continuation_of_an_earlier_occurrence(
    text: bytes, draft: bytes, suffix: int, renames: dict[bytes, bytes]
) -> bool:
    return any(
        text[end - suffix : end] == text[-suffix:] and renamed_reference(text, end, renames).startswith(draft)
        for end in range(suffix, len(text))
    )


PIECES = [b"ab", b"a_b", b"x", b"ba", b" ", b"(", b")", b"\n", b"x("]


@st.composite
def edited_texts(draw: st.DrawFn) -> bytes:
    """Code-like text, then a copy of it with one identifier renamed and a few bytes changed: an edit answer."""
    first = b"".join(draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=30)))
    old, new = draw(st.sampled_from([(b"ab", b"do_ab"), (b"x", b"y_x"), (b"ba", b"ab")]))
    second = bytearray(re.sub(rb"\b" + old + rb"\b", new, first))
    for at, byte in draw(st.lists(st.tuples(st.integers(0, 200), st.sampled_from(b"ab( ")), max_size=2)):
        second[at % len(second) : at % len(second) + 1] = bytes([byte])
    return first + bytes(second)


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(edited_texts(), st.lists(st.sampled_from(PIECES), min_size=1, max_size=40).map(b"".join)),
    splits=st.lists(st.integers(min_value=0, max_value=240), max_size=12),
    max_tokens=st.integers(min_value=1, max_value=12),
    min_match=st.integers(min_value=1, max_value=6),
)
def test_a_draft_is_what_followed_an_earlier_occurrence_of_the_suffix(
    text: bytes, splits: Sequence[int], max_tokens: int, min_match: int
) -> None:
    cuts = sorted({min(s, len(text)) for s in splits} | {len(text)})
    drafter = LookupDrafter(min_match=min_match)
    drafter.begin(DraftContext(text=text[: cuts[0]]))
    done = cuts[0]
    for cut in [*cuts[1:], len(text)]:
        draft = drafter.propose(max_tokens)
        assert drafter.text == text[:done]
        if draft.text:
            assert draft.source == "lookup" and len(draft.text) <= max_tokens * 3.5
            assert is_continuation_of_an_earlier_occurrence(text[:done], draft.text, min_match, drafter.renames)
        drafter.extend(text[done:cut])
        done = cut


@settings(max_examples=200, deadline=None)
@given(
    text=st.one_of(edited_texts(), st.lists(st.sampled_from(PIECES), min_size=1, max_size=40).map(b"".join)),
    splits=st.lists(st.integers(min_value=0, max_value=240), max_size=12),
    min_match=st.integers(min_value=1, max_value=6),
)
def test_may_propose_says_exactly_whether_a_proposal_now_would_find_a_draft(
    text: bytes, splits: Sequence[int], min_match: int
) -> None:
    """The loop skips weighing a length on its word: it must never hide a draft, nor change the next proposal."""
    cuts = sorted({min(s, len(text)) for s in splits} | {len(text)})
    drafter, twin = LookupDrafter(min_match=min_match), LookupDrafter(min_match=min_match)
    for d in (drafter, twin):
        d.begin(DraftContext(text=text[: cuts[0]]))
    done = cuts[0]
    for cut in cuts[1:]:
        asked = drafter.may_propose()
        draft = drafter.propose(4)
        assert asked == bool(draft.text)
        assert draft == twin.propose(4)  # as if it had not been asked
        for d in (drafter, twin):
            d.extend(text[done:cut])
        done = cut


def test_a_hybrid_may_propose_while_its_model_follows_else_as_lookup_says() -> None:
    hybrid = HybridDrafter(LookupDrafter(), ScriptedModel())
    hybrid.begin(DraftContext(text=b"zqk"))
    assert hybrid.may_propose() and not hybrid.lookup.may_propose()
    hybrid.follow_only(("lookup",))
    hybrid.begin(DraftContext(text=b"print(x)\nprint(y)\nzqk"))
    assert not hybrid.may_propose()
    hybrid.extend(b"\nprint(")
    assert hybrid.may_propose()


RENAMED_FIELD_SOURCE = (b"// four alike\n\n" + b"".join(b"fn %s() {\n    self.items.touch()\n}\n\n" % name
                                                         for name in (b"a", b"b", b"c", b"d")) + b"// end\n")


def renamed_field_drafter() -> LookupDrafter:
    """Four functions alike but for their names, the field ``items`` renamed ``buffer`` by the answer, learned at the
    first function's body."""
    drafter = started(RENAMED_FIELD_SOURCE)
    drafter.extend(b"fn a() {\n")
    assert drafter.propose(8).text.startswith(b"    self.items.touch()")
    drafter.extend(b"    self.")
    drafter.extend(b"buffer.touch()\n}\n\nfn")
    assert drafter.propose(16).text.startswith(b" b() {\n    self.buffer.touch()")
    assert drafter.renames == {b"items": b"buffer"}
    return drafter


def test_a_commit_through_several_uses_of_a_renamed_identifier_keeps_following_the_copy() -> None:
    drafter = renamed_field_drafter()
    drafter.extend(b" b() {\n    self.buffer.touch()\n}\n\nfn c() {\n    self.buffer.touch()\n}\n\nfn")
    assert drafter.propose(16).text.startswith(b" d() {\n    self.buffer.touch()\n}\n")


@pytest.mark.parametrize(("commits", "expected"), [
    ((b" b() {\n    self.store.touch()\n}\n\nfn",), b" c() {\n    self.store.touch()"),  # a new name: an edit
    ((b" b() {\n    self.buf", b"fer.touch()\n}\n\nfn"), b" c() {\n    self.buffer.touch()"),  # not yet whole
], ids=["another-name", "identifier-cut-by-the-commit"])
def test_the_copy_breaks_where_the_answer_leaves_it_and_resumes_near_there(commits: tuple[bytes, ...],
                                                                           expected: bytes) -> None:
    drafter = renamed_field_drafter()
    for commit in commits:
        drafter.extend(commit)
    assert drafter.propose(16).text.startswith(expected)


def test_a_copy_of_the_messages_ends_where_they_do_not_in_the_answers_own_beginning() -> None:
    drafter = LookupDrafter()
    drafter.begin(DraftContext(messages=[ChatMessage("user", "Fix it:\n```\nx = 1\ny = 2\n```")]))
    drafter.extend(b"```\nx = 1\n")
    assert drafter.propose(64).text == b"y = 2\n```\n"  # not on into "```\nx = 1\n", this answer's first line
    drafter.extend(b"y = 2\n```\n")
    assert not drafter.may_propose()
    assert drafter.propose(64) is NO_DRAFT
    completion = started(b"x = 1\ny = 2\n")  # a completion's prompt and answer are one text: a copy goes on
    completion.extend(b"x = 1\n")
    assert completion.propose(64).text == b"y = 2\nx = 1\n"


class WordModel(ScriptedModel):
    """A model double that writes its proposal a piece at a time, asking ``enough`` after each as a model does."""

    def __init__(self, *pieces: bytes) -> None:
        super().__init__(b"".join(pieces))
        self.pieces = pieces
        self.written = 0  # pieces of the last draft

    def propose_until(self, max_tokens: int, enough: Enough, source: str = "any", worth: Worth | None = None) -> Draft:
        self.proposals += 1
        text, self.written = b"", 0
        for piece in self.pieces[:max_tokens]:
            text, self.written = text + piece, self.written + 1
            if enough(text):
                break
        return Draft(text, "model", drafter_tokens=self.written) if text else NO_DRAFT


CHECK_PROMPT = b"def is_palindrome(string):\n    return string == string[::-1]\n\n\ndef f(string):\n    return string"


@pytest.mark.parametrize(("pieces", "source", "text", "written"), [
    ((b" ==", b" string", b"[::-1]"), "lookup", b" == string[::-1]\n\n\ndef f(str", 2),  # ` ==`: 3 bytes, a piece more
    ((b"\n", b"\n"), "model", b"\n\n", 2),  # the model's own: it writes on to its own draft's end
    ((b" +", b" string"), "model", b" + string", 2),
    ((), "lookup", b" == string[::-1]\n\n\ndef f(str", 0),  # nothing to say against the copy
], ids=["agrees-at-four-bytes", "disagrees-at-its-first-byte", "disagrees-at-its-second", "offers-nothing"])
def test_a_checked_draft_is_lookup_s_where_the_model_s_first_bytes_agree_else_the_model_s(
        pieces: tuple[bytes, ...], source: str, text: bytes, written: int) -> None:
    model = WordModel(*pieces)
    hybrid = HybridDrafter(LookupDrafter(), model)
    hybrid.begin(DraftContext(text=CHECK_PROMPT))
    draft = hybrid.propose_until(8, lambda drafted: False, CHECKED)
    assert (draft.source, draft.text, model.written) == (source, text, written)


def test_a_checked_draft_without_a_match_is_the_model_s_and_a_lookup_draft_never_asks_it() -> None:
    model = WordModel(b" x", b" = 1")
    hybrid = HybridDrafter(LookupDrafter(), model)
    hybrid.begin(DraftContext(text=b"zqk"))
    assert hybrid.propose_until(8, lambda drafted: False, CHECKED).text == b" x = 1"
    hybrid.begin(DraftContext(text=CHECK_PROMPT))
    asked = model.proposals
    assert hybrid.propose_until(8, lambda drafted: False, "lookup").source == "lookup"
    assert hybrid.propose_until(8, lambda drafted: False, "any").source == "lookup"
    assert model.proposals == asked
