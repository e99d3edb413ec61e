"""Draft text -> target tokens (ds4spec.core.align) on both tiny tokenizer families: byte BPE and SentencePiece."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path

import llama_cpp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tinymodel import TRAINING_TEXT

from ds4spec.backend.runtime import init_llama
from ds4spec.backend.tokenizer import LlamaTokenizer
from ds4spec.core.align import adds_space_prefix, align_draft, last_chunk_start

KINDS = ("bpe", "spm")
CODE = TRAINING_TEXT.encode()
_SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def toks(tiny_models: dict[str, Path]) -> Iterator[dict[str, LlamaTokenizer]]:
    """The tiny models' tokenizers, loaded vocabulary-only (no weights, no context: milliseconds)."""
    init_llama()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    models = {kind: llama_cpp.llama_model_load_from_file(str(p).encode(), params) for kind, p in tiny_models.items()}
    assert all(models.values())
    yield {kind: LlamaTokenizer(llama_cpp.llama_model_get_vocab(model)) for kind, model in models.items()}
    for model in models.values():
        llama_cpp.llama_model_free(model)


class CountingTokenizer:
    """A thin wrapper that counts tokenizer calls and the bytes they tokenize (the cost of one alignment), and
    keeps the results (what the window re-tokenized to)."""

    def __init__(self, tok: LlamaTokenizer) -> None:
        self._tok = tok
        self.calls = 0
        self.bytes = 0
        self.results: list[list[int]] = []

    def tokenize(self, text: bytes, *, add_special: bool = False, parse_special: bool = False) -> list[int]:
        assert not parse_special, "draft text must never become special tokens"
        self.calls += 1
        self.bytes += len(text)
        self.results.append(self._tok.tokenize(text, add_special=add_special, parse_special=parse_special))
        return self.results[-1]

    def __getattr__(self, name: str) -> object:
        return getattr(self._tok, name)


def _committed(tok: LlamaTokenizer, text: bytes) -> list[int]:
    """The tokens a target holds for a prompt: with BOS where the model adds one (SentencePiece)."""
    return tok.tokenize(text, add_special=True)


def _assert_safe(tok: LlamaTokenizer, committed: list[int], draft: bytes, aligned: list[int], max_tokens: int) -> None:
    spelled = tok.detokenize(committed + aligned)
    before = tok.detokenize(committed)
    assert spelled.startswith(before)
    assert draft.startswith(spelled[len(before) :])
    assert len(aligned) <= max_tokens
    assert not any(tok.is_control(t) for t in aligned)


def _pieces(tok: LlamaTokenizer, ids: list[int]) -> list[bytes]:
    return [tok.piece(t) for t in ids]


_FRAGMENTS = st.sampled_from(
    [*"abcxyz_ retun\t():.,=+-*/\"'<>|#{}[]019", "\n", "\n\n", "  ", "    ", "\r\n", "return", "def ", "self.",
     "<|im_end|>", "<s>", "é", "ü", "日本", "🙂", "→", "λ", "1.5", "..."]
)
_TEXT = st.lists(_FRAGMENTS, max_size=30).map("".join)


@_SETTINGS
@given(kind=st.sampled_from(KINDS), text=_TEXT, data=st.data(), max_tokens=st.integers(0, 24),
       window=st.integers(0, 10), tail=st.booleans())
def test_aligned_tokens_spell_a_prefix_of_the_draft(toks: dict[str, LlamaTokenizer], kind: str, text: str,
                                                    data: st.DataObject, max_tokens: int, window: int,
                                                    tail: bool) -> None:
    """The contract, on random code-like text cut at a random point, with or without the unstable tail: the
    offered tokens spell a prefix of the draft right after the committed text, hold no control token, and respect
    ``max_tokens``."""
    tok = toks[kind]
    split = data.draw(st.integers(0, len(text)), label="split")
    committed = _committed(tok, text[:split].encode())
    draft = text[split:].encode()
    aligned = align_draft(tok, committed, draft, max_tokens=max_tokens, window=window, unstable_tail=tail)
    _assert_safe(tok, committed, draft, aligned, max_tokens)


@_SETTINGS
@given(kind=st.sampled_from(KINDS), prefix=_TEXT, junk=st.lists(st.integers(0, 600), max_size=6),
       draft=st.binary(max_size=60), tail=st.booleans())
def test_arbitrary_bytes_never_break_the_contract(toks: dict[str, LlamaTokenizer], kind: str, prefix: str,
                                                  junk: list[int], draft: bytes, tail: bool) -> None:
    """Drafters and random-weight targets both emit broken UTF-8 (here: a draft of any bytes, committed tokens
    that end in arbitrary ids, byte tokens included). Alignment must stay safe; it must also never hand invalid
    UTF-8 to llama.cpp, which aborts the whole process on some (``std::invalid_argument: invalid codepoint``)."""
    tok = toks[kind]
    committed = _committed(tok, prefix.encode()) + [t % tok.n_vocab for t in junk]
    _assert_safe(tok, committed, draft, align_draft(tok, committed, draft, max_tokens=16, unstable_tail=tail), 16)


@_SETTINGS
@given(kind=st.sampled_from(KINDS), prefix=_TEXT, draft=_TEXT, more=_TEXT)
def test_aligned_tokens_are_what_the_target_tokenizer_gives_any_longer_text(
    toks: dict[str, LlamaTokenizer], kind: str, prefix: str, draft: str, more: str
) -> None:
    """The unstable-tail rule: whatever bytes follow the draft, the offered tokens are the canonical ones.

    Only canonical committed prefixes are checked (``committed`` is a prefix of the tokens of the whole text);
    elsewhere the target's own tokens are not the canonical ones anyway. An empty prompt is left out: after a
    bare BOS, SentencePiece's first token carries the prefix space, which is not part of the draft.
    """
    tok = toks[kind]
    committed = _committed(tok, prefix.encode())
    whole = _committed(tok, (prefix + draft + more).encode())
    if not prefix or whole[: len(committed)] != committed:
        return
    aligned = align_draft(tok, committed, draft.encode(), max_tokens=64)
    assert aligned == whole[len(committed) : len(committed) + len(aligned)]


@pytest.mark.parametrize("kind", KINDS)
def test_draft_ending_inside_a_word_does_not_offer_the_truncated_token(toks: dict[str, LlamaTokenizer],
                                                                        kind: str) -> None:
    """``retu`` tokenizes as ``re`` ``t`` ``u`` but ``return`` is one token: no token of the word is offered."""
    tok = toks[kind]
    committed = _committed(tok, b"def main() -> int:\n")
    draft = b"    retu"
    window_text = tok.detokenize(committed[-8:]).removeprefix(b" " if adds_space_prefix(tok) else b"")
    assert any(b"re" in p for p in _pieces(tok, tok.tokenize(window_text + draft)))  # what a naive cut would offer
    aligned = align_draft(tok, committed, draft, max_tokens=16)
    assert b"r" not in tok.detokenize(aligned)
    whole = _committed(tok, b"def main() -> int:\n    return 0\n")
    assert aligned == whole[len(committed) : len(committed) + len(aligned)]
    # Once the word is complete and followed by something else, its token is offered.
    longer = align_draft(tok, committed, b"    return 0\n", max_tokens=16)
    assert tok.detokenize(longer) == b"    return 0"
    assert longer == whole[len(committed) : len(committed) + len(longer)]


@pytest.mark.parametrize("kind", KINDS)
def test_an_unstable_tail_is_offered_as_the_draft_spells_it(toks: dict[str, LlamaTokenizer], kind: str) -> None:
    """Asked for (a model drafter that stops as soon as its text is enough), the last word comes too, complete or
    not: ``    return 0`` whole, and ``    retu`` as whatever tokens spell it; still never a committed token rewritten,
    never part of a character."""
    tok = toks[kind]
    committed = _committed(tok, b"def main() -> int:\n")
    whole = _committed(tok, b"def main() -> int:\n    return 0\n")
    stable = align_draft(tok, committed, b"    return 0", max_tokens=16)
    assert tok.detokenize(stable) == b"    return"
    offered = align_draft(tok, committed, b"    return 0", max_tokens=16, unstable_tail=True)
    assert tok.detokenize(offered) == b"    return 0"
    assert offered == whole[len(committed) : len(committed) + len(offered)]
    assert tok.detokenize(align_draft(tok, committed, b"    retu", max_tokens=16, unstable_tail=True)) == b"    retu"
    assert len(align_draft(tok, committed, b"    return 0", max_tokens=2, unstable_tail=True)) == 2
    text = '    print("日本")'.encode()
    cut = text.index("本".encode()) + 1  # inside the character
    assert tok.detokenize(align_draft(tok, committed, text[:cut], max_tokens=32, unstable_tail=True)) == text[: cut - 1]
    merging = _committed(tok, b"def main() -> int:\n    ret")
    assert align_draft(tok, merging, b"urn 0\n", max_tokens=16, unstable_tail=True) == []


@pytest.mark.parametrize("kind", KINDS)
def test_draft_ending_inside_a_utf8_character_is_cut_before_it(toks: dict[str, LlamaTokenizer], kind: str) -> None:
    tok = toks[kind]
    committed = _committed(tok, b"def greet():\n")
    text = '    print("日本語")\n'.encode()
    start = text.index("本".encode())
    before = align_draft(tok, committed, text[:start], max_tokens=32)
    assert before
    for end in (start + 1, start + 2):  # one and two of the three bytes of the character
        aligned = align_draft(tok, committed, text[:end], max_tokens=32)
        assert len(tok.detokenize(aligned)) <= start
        assert aligned == before  # as if the draft stopped before the character: the rest is not lost either
    # The whole character, followed by more text, goes through (possibly as several byte tokens).
    assert tok.detokenize(align_draft(tok, committed, text, max_tokens=32)).startswith(text[: start + 3])


@pytest.mark.parametrize("kind", KINDS)
def test_committed_text_ending_inside_a_character_is_completed_by_the_draft(toks: dict[str, LlamaTokenizer],
                                                                            kind: str) -> None:
    """A target may emit the first byte token of a character; the draft then starts with the other bytes."""
    tok = toks[kind]
    text = '# 日本語 龘 ok\nx = 1\n'.encode()  # 龘 is in neither vocabulary: byte tokens (SentencePiece fallback)
    whole = _committed(tok, text)
    text = tok.detokenize(whole)  # with SentencePiece's prefix space, so that offsets match the pieces
    ends = list(accumulate(len(p) for p in _pieces(tok, whole)))
    inside = [i + 1 for i, e in enumerate(ends) if 0 < e < len(text) and (text[e] & 0xC0) == 0x80]
    committed = whole[: inside[0]]
    draft = text[ends[inside[0] - 1] :]
    aligned = align_draft(tok, committed, draft, max_tokens=32)
    _assert_safe(tok, committed, draft, aligned, 32)
    assert aligned and aligned == whole[len(committed) : len(committed) + len(aligned)]


@pytest.mark.parametrize("kind", KINDS)
def test_never_rewrites_committed_tokens_when_the_boundary_would_merge(toks: dict[str, LlamaTokenizer],
                                                                       kind: str) -> None:
    """Committed ``... ret`` (a prompt that ends inside a word), draft ``urn 0``: together they tokenize as
    ``return``, which would rewrite a committed token. Nothing is offered: a real target goes on with a token that
    does not merge (see ``align_draft``), so the draft tokenized on its own would only be rejected."""
    tok = toks[kind]
    prompt, draft = b"def main() -> int:\n    ret", b"urn 0\n"
    committed = _committed(tok, prompt)
    together = _committed(tok, prompt + draft)
    assert together[: len(committed)] != committed  # the precondition: the boundary merges
    assert align_draft(tok, committed, draft, max_tokens=16) == []
    # The same draft after a committed text that ends on a real boundary is offered.
    committed = _committed(tok, prompt + b"urn")
    assert tok.detokenize(align_draft(tok, committed, b" 0\n    x = 1\n", max_tokens=16)) == b" 0\n    x = 1"


@pytest.mark.parametrize("kind", KINDS)
def test_text_that_looks_like_a_control_token_stays_text(toks: dict[str, LlamaTokenizer], kind: str) -> None:
    tok = toks[kind]
    controls = {t for t in range(tok.n_vocab) if tok.is_control(t)}
    assert controls
    # A chat prompt whose last tokens are control tokens: the window starts after them.
    committed = _committed(tok, b"") + tok.tokenize(b"<|im_start|>assistant\n", parse_special=True)
    assert controls & set(committed)
    draft = b"<|im_end|>\n<|endoftext|><s></s> done\n"
    aligned = align_draft(tok, committed, draft, max_tokens=64)
    _assert_safe(tok, committed, draft, aligned, 64)
    assert tok.detokenize(aligned) == draft[: draft.index(b"\n", 11)]  # all but the unstable last chunk
    assert not controls & set(aligned)
    # The offer stops before any token the vocabulary marks as control, whatever the tokenizer returned.
    pretend = CountingTokenizer(tok)
    marked = aligned[3]
    pretend.is_control = lambda t: t == marked or tok.is_control(t)  # type: ignore[method-assign]
    assert align_draft(pretend, committed, draft, max_tokens=64) == aligned[:3]  # type: ignore[arg-type]


def test_text_before_a_control_token_does_not_merge_with_the_draft(toks: dict[str, LlamaTokenizer]) -> None:
    """The window starts after the last control token: ``x = 1\\n<|im_end|>`` then ``\\nfoo`` must not be
    re-tokenized as ``\\n\\n`` (which would count as a boundary merge and offer nothing)."""
    tok = toks["bpe"]
    committed = tok.tokenize(b"x = 1\n<|im_end|>", parse_special=True)
    assert tok.is_control(committed[-1])
    assert tok.detokenize(align_draft(tok, committed, b"\nfoo = 2\n", max_tokens=8)) == b"\nfoo = 2"


@pytest.mark.parametrize("kind", KINDS)
def test_cost_does_not_grow_with_the_committed_length(toks: dict[str, LlamaTokenizer], kind: str) -> None:
    tok = toks[kind]
    long_text = CODE * (1 + 5000 // len(tok.tokenize(CODE)))
    tail = _committed(tok, long_text)
    assert len(tail) >= 5000
    draft = b"total = counter.value + 1\n"
    costs = []
    for committed in (tail[-50:], tail[-5000:]):
        counting = CountingTokenizer(tok)
        aligned = align_draft(counting, committed, draft, max_tokens=16)  # type: ignore[arg-type]
        assert aligned
        costs.append((counting.calls, counting.bytes, aligned))
    assert costs[0] == costs[1]
    window_bytes = len(tok.detokenize(tail[-8:]))
    assert costs[0][0] <= 2  # the one-time space-prefix probe and the window + draft, tokenized once
    assert costs[0][1] <= window_bytes + len(draft) + 1


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_draft_of_the_target_own_text_aligns_to_its_own_tokens(toks: dict[str, LlamaTokenizer],
                                                                      kind: str) -> None:
    """On canonical text, a drafter that guesses the target's next 16 tokens exactly gets them all back, except
    the tokens of the draft's last chunk, which more text could still change."""
    tok = toks[kind]
    ids = _committed(tok, CODE)
    offered = stable = 0
    for i in range(1, len(ids) - 16, 3):
        nxt = ids[i : i + 16]
        draft = tok.detokenize(nxt)
        aligned = align_draft(tok, ids[:i], draft, max_tokens=16)
        assert aligned == nxt[: len(aligned)]
        cut = last_chunk_start(draft, whole_space_run=adds_space_prefix(tok))
        stable += sum(end <= cut for end in accumulate(len(p) for p in _pieces(tok, nxt)))
        offered += len(aligned)
    assert offered >= 0.97 * stable
    assert offered >= 0.8 * 16 * len(range(1, len(ids) - 16, 3))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("window", [1, 2, 3, 5, 8])
def test_window_cut_in_the_middle_of_the_text_reproduces_the_boundary(toks: dict[str, LlamaTokenizer], kind: str,
                                                                      window: int) -> None:
    """SentencePiece prefixes every tokenized text with a space: a window that starts with ``▁foo`` must not
    become ``▁▁foo``, and one that starts with ``(`` or inside a word gets the extra space skipped by offset."""
    tok = toks[kind]
    assert adds_space_prefix(tok) == (kind == "spm")
    ids = _committed(tok, CODE)
    hits = 0
    for i in range(20, 400, 7):
        aligned = align_draft(tok, ids[:i], tok.detokenize(ids[i : i + 8]), max_tokens=8, window=window)
        assert aligned == ids[i : i + len(aligned)]
        hits += bool(aligned)
    assert hits >= 0.8 * len(range(20, 400, 7))


@pytest.mark.parametrize("kind", KINDS)
def test_window_re_tokenizes_exactly_as_committed_from_its_first_token(toks: dict[str, LlamaTokenizer],
                                                                       kind: str) -> None:
    """A window that starts with a word token (``▁def``) is given to SentencePiece without its space, which the
    tokenizer's own prefix puts back; handing it over as is would tokenize ``▁▁def`` and lose the first token."""
    tok = toks[kind]
    ids = _committed(tok, CODE)
    checked = 0
    for i in range(20, len(ids) - 8):
        if not tok.piece(ids[i - 4]).startswith(b" ") or not tok.piece(ids[i - 4]).strip().isalpha():
            continue
        counting = CountingTokenizer(tok)
        adds_space_prefix(counting)  # type: ignore[arg-type]  # the one-time probe, out of the way
        counting.results.clear()
        draft = tok.detokenize(ids[i : i + 8])
        if last_chunk_start(draft) == 0:  # one chunk, all unstable: nothing is tokenized
            continue
        align_draft(counting, ids[:i], draft, max_tokens=8, window=4)  # type: ignore[arg-type]
        assert counting.results[0][:4] == ids[i - 4 : i]  # the first re-tokenization: window + draft
        checked += 1
    assert checked >= 20


def test_trivial_inputs(toks: dict[str, LlamaTokenizer]) -> None:
    tok = toks["bpe"]
    committed = tok.tokenize(b"x = 1\n")
    assert align_draft(tok, committed, b"", max_tokens=8) == []
    assert align_draft(tok, committed, b"y = 2\n", max_tokens=0) == []
    assert align_draft(tok, committed, b"word", max_tokens=8) == []  # a single chunk is all unstable tail
    assert len(align_draft(tok, committed, b"y = 2 + 3 + 4\n", max_tokens=2)) == 2
    assert align_draft(tok, [], b"y = 2\n", max_tokens=8) == tok.tokenize(b"y = 2")


@pytest.mark.parametrize(
    ("data", "start", "spm_start"),
    [
        (b"foo bar", 3, 3),
        (b"x.append", 1, 1),  # Qwen: "x" ".append"
        (b"foo_bar", 3, 3),  # "_" is not a letter to the pre-tokenizers: "foo" "_bar"
        (b"a\n\n", 1, 1),  # "\n" may still become "\n\n"
        (b"x ==", 1, 1),
        (b"x):\n", 1, 1),  # whitespace takes the punctuation before it: "):\n" is one Qwen token
        (b"a > ", 1, 1),  # DeepSeek-Coder: "> " before a word
        (b"f(x)", 3, 3),
        (b"\nretu", 1, 0),
        (b"a\n    b", 5, 1),  # SentencePiece: how a run of spaces splits depends on the word after it
        (b"\tfoo", 0, 0),
        ("x\u00a0  ".encode(), 1, 1),  # a no-break space is whitespace, not a letter
        ("é日本".encode(), 0, 0),
        (b"", 0, 0),
    ],
)
def test_last_chunk_start(data: bytes, start: int, spm_start: int) -> None:
    assert last_chunk_start(data) == start
    assert last_chunk_start(data, whole_space_run=True) == spm_start
