"""Releasing committed bytes as text: whole UTF-8 characters only, stop strings cut exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ds4spec.core.textstream import TextAssembler


def _run(chunks: list[bytes], stop: list[str]) -> tuple[list[str], str, bool]:
    t = TextAssembler(stop)
    released: list[str] = []
    for c in chunks:
        r = t.feed(c)
        released.append(r.text)
        if r.stopped:
            return released, "".join(released), True
    released.append(t.finish().text)
    return released, "".join(released), False


def test_a_token_ending_inside_a_character_waits_for_the_rest() -> None:
    arrow = "→".encode()  # three bytes
    released, text, _ = _run([b"a" + arrow[:1], arrow[1:2], arrow[2:] + b"b"], [])
    assert released[:3] == ["a", "", "→b"]
    assert text == "a→b"


def test_an_unfinished_character_at_the_end_becomes_a_replacement_character() -> None:
    _, text, _ = _run([b"ok", "🙂".encode()[:2]], [])
    assert text == "ok\ufffd"


def test_stop_string_across_tokens_ends_the_output_just_before_it() -> None:
    _released, text, stopped = _run([b"return x\n", b"\n\nd", b"ef next"], ["\n\n\n"])
    assert stopped and text == "return x"


def test_text_that_could_start_a_stop_string_is_held_until_it_cannot() -> None:
    t = TextAssembler(["STOP"])
    assert t.feed(b"abc ST").text == "abc "
    assert t.pending_text == "ST"
    assert t.feed(b"ART").text == "START"


def test_earliest_of_several_stop_strings_wins() -> None:
    _, text, stopped = _run([b"one two three"], ["three", "two"])
    assert stopped and text == "one "


@given(
    text=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=8),
    stop=st.lists(st.text(min_size=1, max_size=4), max_size=2),
)
def test_released_text_is_the_text_up_to_the_first_stop_whatever_the_chunking(
    text: str, cuts: list[int], stop: list[str]
) -> None:
    data = text.encode()
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    released, out, stopped = _run(chunks, stop)
    hits = [i for i in (text.find(s) for s in stop) if i >= 0]
    expected = text[: min(hits)] if hits else text
    assert out == expected
    assert stopped == bool(hits)
    for piece in released:
        piece.encode("utf-8")  # every released chunk is whole characters
