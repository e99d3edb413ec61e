"""Alignment on the real target tokenizer (Qwen2.5-Coder): an oracle drafter gets back nearly all its tokens."""

from __future__ import annotations

from ds4spec.backend.target import LlamaTarget
from ds4spec.core.align import align_draft

# Three HumanEval prompts with their canonical solutions (HumanEval/12, /35, /55).
SNIPPETS = [
    '''from typing import List, Optional


def longest(strings: List[str]) -> Optional[str]:
    """ Out of list of strings, return the longest one. Return the first one in case of multiple
    strings of the same length. Return None in case the input list is empty.
    >>> longest([])

    >>> longest(['a', 'b', 'c'])
    'a'
    >>> longest(['a', 'bb', 'ccc'])
    'ccc'
    """
    if not strings:
        return None

    maxlen = max(len(x) for x in strings)
    for s in strings:
        if len(s) == maxlen:
            return s
''',
    '''

def max_element(l: list):
    """Return maximum element in the list.
    >>> max_element([1, 2, 3])
    3
    >>> max_element([5, 3, -5, 2, -3, 3, 9, 0, 123, 1, -10])
    123
    """
    m = l[0]
    for e in l:
        if e > m:
            m = e
    return m
''',
    '''

def fib(n: int):
    """Return n-th Fibonacci number.
    >>> fib(10)
    55
    >>> fib(1)
    1
    >>> fib(8)
    21
    """
    if n == 0:
        return 0
    if n == 1:
        return 1
    return fib(n - 1) + fib(n - 2)
''',
]
DRAFT_TOKENS = 16


def test_oracle_draft_of_the_next_16_tokens_returns_at_least_90_percent(real_target: LlamaTarget) -> None:
    """At every position of real code, the text of the target's own next 16 tokens aligns to those tokens, less
    the unstable last chunk (usually one token): at least 90% of them in all, and never a different token."""
    tok = real_target.tokenizer
    offered = drafted = 0
    for snippet in SNIPPETS:
        ids = tok.tokenize(snippet.encode(), add_special=True)
        for i in range(1, len(ids) - DRAFT_TOKENS):
            nxt = ids[i : i + DRAFT_TOKENS]
            aligned = align_draft(tok, ids[:i], tok.detokenize(nxt), max_tokens=DRAFT_TOKENS)
            assert aligned == nxt[: len(aligned)], (snippet, i)
            offered += len(aligned)
            drafted += DRAFT_TOKENS
    assert offered >= 0.9 * drafted, offered / drafted
