"""``stop_at``: an option ends at the end of its line or block, a JSON answer at the end of its object, and streamed
text is never taken back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4spec.faces.shared.stopping import Stopper, decide


@pytest.mark.parametrize(("text", "expected"), [
    ("x + 1", "x + 1"),  # no newline yet: all of it stays
    ("x + 1\ny = 2", "x + 1"),
    ("\n    return x\n    y", "\n    return x"),  # the first line holding text, after the cursor's line ends
    ("  \n\n", ""),  # only whitespace: nothing
])
def test_line_ends_at_the_end_of_the_first_line_with_text(text: str, expected: str) -> None:
    assert _final(text, "line") == expected


@pytest.mark.parametrize(("head", "text", "expected"), [
    # Python body at indentation 4: a dedent ends the block, blank lines inside it do not.
    ("    ", "a = 1\n\n    return a\ndef g():\n", "a = 1\n\n    return a"),
    # At the top level, a blank line followed by top-level text starts something new.
    ("def f(x):", "\n    return x\n\ndef g():\n    pass", "\n    return x"),
    # A brace block: the closing brace is indented less than the body.
    ("  ", "x++;\n  y++;\n}\nint z;", "x++;\n  y++;"),
    # The cursor's line counts when it holds text: a deeper body continues it.
    ("if (a) {", "\n    b();\n    c();\n", "\n    b();\n    c();"),
    # Tabs count as eight columns.
    ("\t", "x\n\ty\n    z", "x\n\ty"),
])
def test_block_ends_before_the_first_line_that_leaves_the_block(head: str, text: str, expected: str) -> None:
    assert _final(text, "block", head) == expected


@pytest.mark.parametrize(("text", "expected"), [
    (' "a": 1}\nThat is the object you asked for.', ' "a": 1}'),
    (' "s": "}", "t": {"u": [1, {}]}} {}', ' "s": "}", "t": {"u": [1, {}]}}'),  # braces in strings and nested
    (' "a": [1, 2', ' "a": [1, 2'),  # not whole yet: all of it stays, as when max_tokens cuts it
    ("}", "}"),  # the empty object
    ("Sure! Here it is", "Sure! Here it is"),  # no JSON at all: the answer goes on as the model writes it
])
def test_a_json_answer_ends_with_its_object(text: str, expected: str) -> None:
    """The answer opened with ``{`` (the head); the model's text goes on from there."""
    assert _final(text, "json", "{") == expected


@pytest.mark.parametrize(("text", "expected"), [
    ('\n {"a": 1}\nDone.', '\n {"a": 1}'),
    ("42 is the answer", "42 is the answer"),  # JSON, but no object: words
    ('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', '<tool_call>\n{"name": "f", "arguments": {}}\n'
                                                                 "</tool_call>"),
])
def test_an_answer_not_opened_for_it_ends_only_after_an_object(text: str, expected: str) -> None:
    """Where tools are offered a JSON answer is not opened: the model may call instead, or write its object itself."""
    assert _final(text, "json") == expected


def test_without_a_mode_everything_is_final_at_once() -> None:
    assert decide("a\n\nb  ", None) == (6, False)


def test_the_stopper_says_done_and_ignores_what_comes_after() -> None:
    stopper = Stopper("line")
    assert stopper.feed("  ") == ""
    assert stopper.feed("ab") == "  ab"
    assert stopper.feed("c\nd") == "c"
    assert stopper.done and stopper.text == "  abc"
    assert stopper.feed("more") == "" and stopper.text == "  abc"


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=' \t\nab}{":1', max_size=40), head=st.sampled_from(["", "  ", "x = ", "\t"]),
       mode=st.sampled_from(["line", "block", "json"]), cuts=st.lists(st.integers(0, 40), max_size=6))
def test_streaming_in_any_pieces_gives_the_same_option_and_never_takes_text_back(
        text: str, head: str, mode: str, cuts: list[int]) -> None:
    if mode == "json":
        head = "{"  # a JSON answer opens with it
    whole = _final(text, mode, head)
    stopper = Stopper(mode, head)
    shown = ""
    start = 0
    for cut in [*sorted(c for c in cuts if c <= len(text)), len(text)]:
        shown += stopper.feed(text[start:cut])
        start = max(start, cut)
        assert stopper.text == shown
    assert shown == whole
    assert whole == text[:len(whole)]


def _final(text: str, mode: str, head: str = "") -> str:
    stopper = Stopper(mode, head)
    stopper.feed(text)
    return stopper.text
