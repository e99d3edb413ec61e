"""How the REPL writes a streamed answer: prose at once, fenced code highlighted line by line, no terminal
commands smuggled in by the model, and no escape sequences at all without colour."""

from __future__ import annotations

import itertools
import re

from hypothesis import given
from hypothesis import strategies as st

from ds4spec.faces.repl.render import StreamRenderer
from ds4spec.faces.shared.fences import code_blocks
from ds4spec.faces.shared.visible import visible

ANSI = re.compile(r"\x1b\[[0-9;]*m")
ANSWER = "Use a loop:\n\n```python\ndef f(n):\n    return 'x' * n\n```\nDone.\n"


def render(chunks: list[str], color: bool = True) -> tuple[list[str], str]:
    r = StreamRenderer(color)
    written = [r.feed(c) for c in chunks]
    return written, "".join(written) + r.finish()


def test_prose_is_written_the_moment_it_arrives() -> None:
    written, _ = render(["Hel", "lo, wor", "ld"])
    assert written == ["Hel", "lo, wor", "ld"]


def test_code_lines_are_written_highlighted_once_complete() -> None:
    written, out = render(["```py", "thon\nde", "f f(n):\n", "    return 1\n```\n"])
    assert written[0] == ""  # a line that may open a fence is held until it ends
    assert ANSI.sub("", written[1]) == "```python\n"  # ... and the partial code line "de" is held too
    assert ANSI.sub("", written[2]) == "def f(n):\n" and "\x1b[" in written[2]  # whole, with colours
    assert ANSI.sub("", out) == "```python\ndef f(n):\n    return 1\n```\n"


def test_a_line_that_only_looks_like_a_fence_at_first_is_written_when_it_ends() -> None:
    written, out = render(["`x` is", " a name\n", "more"])
    assert written == ["", "`x` is a name\n", "more"]
    assert out == "`x` is a name\nmore"


@given(st.lists(st.integers(min_value=1, max_value=len(ANSWER)), max_size=12))
def test_any_chunking_gives_the_same_text(cuts: list[int]) -> None:
    points = sorted({0, *cuts, len(ANSWER)})
    chunks = [ANSWER[a:b] for a, b in itertools.pairwise(points)]
    assert ANSI.sub("", render(chunks)[1]) == ANSWER
    assert render(chunks, color=False)[1] == ANSWER


def test_without_colour_nothing_is_held_and_no_escape_is_written() -> None:
    written, out = render(["```py", "thon\nx = 1\n", "```\n"], color=False)
    assert written == ["```py", "thon\nx = 1\n", "```\n"] and "\x1b" not in out


def test_an_answer_cut_off_inside_a_block_is_flushed_with_colours_reset() -> None:
    r = StreamRenderer(True)
    r.feed("```python\nprint('unfinished")
    tail = r.finish()
    assert ANSI.sub("", tail) == "print('unfinished" and tail.endswith("\x1b[0m")
    assert not r.ends_with_newline


def test_control_characters_from_the_model_are_shown_not_obeyed() -> None:
    evil = "ok\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\rdone\x9b\x7f\tend\n"
    for color in (True, False):
        _, out = render([evil], color)
        assert "\x1b]" not in out and "\x1b[2J" not in out and "\r" not in out and "\x07" not in out
    assert visible(evil) == "ok␛]52;c;cm0gLXJmIH4=␇␛[2J␍done\ufffd\u2421\tend\n"


def test_code_blocks_are_found_with_their_language_and_fence() -> None:
    blocks = code_blocks("a\n```sh\nls\n```\n ~~~~ python extra\nx\n~~~~~\n````\nopen")
    assert [(b.fence, b.language, b.code, b.closed) for b in blocks] == [
        ("```", "sh", "ls\n", True), ("~~~~", "python", "x\n", True), ("````", "", "open", False)]
