"""`ds4spec chat` driven by Textual's Pilot on tiny real models: what a user does, and what they see.

Each test runs the real app headless (``App.run_test``) with a real Engine on a tiny GGUF model and a real
session file; nothing is stubbed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chat_helpers import answered, drive, make_app, notes, ready, send, status_line, until, views
from textual.pilot import Pilot
from textual.widgets import Markdown, Static

from ds4spec.chat.app import ChatApp
from ds4spec.chat.provenance import DRAFT_STYLE, TARGET_STYLE
from ds4spec.chat.widgets import ChatInput
from ds4spec.events import Provenance, TextChunk
from ds4spec.sessions import SessionStore
from ds4spec.tinymodel import build_tiny_gguf


@pytest.fixture(scope="module")
def endless_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model that never ends an answer by itself, so that there is time to cancel it."""
    return build_tiny_gguf(tmp_path_factory.mktemp("endless") / "endless.gguf", never_ends=True)


def stored(app: ChatApp) -> list[tuple[str, str, str]]:
    return [(m.role, m.content, m.status) for m in app.store.messages(app.conversation.session_id)]


# -- sending and streaming -------------------------------------------------------------------------------


def test_a_message_streams_an_answer_that_is_shown_and_stored(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")
    seen_while_streaming: list[str] = []

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        assert "ds4spec-tiny-bpe" in status_line(app) and "ready" in status_line(app)
        await send(pilot, "hello there")
        await until(pilot, lambda: len(views(app, "assistant")) == 1)
        while app.busy:  # the answer grows on screen chunk by chunk
            seen_while_streaming.append(views(app, "assistant")[0].text)
            await pilot.pause(0.005)
        await answered(pilot)
        answer = views(app, "assistant")[0]
        assert [v.text for v in views(app, "user")] == ["hello there"]
        assert answer.status == "done" and answer.text
        assert stored(app) == [("user", "hello there", "done"), ("assistant", answer.text, "done")]
        assert app.query_one(ChatInput).text == ""
        assert "tok/s" in status_line(app) and "accept" in status_line(app) and "mean" in status_line(app)

    drive(app, scenario)
    assert any(0 < len(partial) < len(app.conversation.last_answer() or "") for partial in seen_while_streaming)


def test_enter_sends_and_ctrl_j_starts_a_new_line(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await pilot.press("a", "ctrl+j", "b")
        assert app.query_one(ChatInput).text == "a\nb"
        await pilot.press("enter")
        await answered(pilot)
        assert stored(app)[0][:2] == ("user", "a\nb")

    drive(app, scenario)


def test_an_empty_message_gives_a_notice_and_stores_nothing(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "  \n ")
        await pilot.pause()
        assert any("Type a message first" in n.message for n in app._notifications)
        assert stored(app) == [] and views(app) == []

    drive(app, scenario)


def test_a_paste_longer_than_the_context_is_refused_and_stays_in_the_input(tiny_bpe_gguf: Path,
                                                                           tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3", ctx=64)
    paste = "def f(x):\n    return x\n" * 40

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, paste)
        await answered(pilot)
        assert app.query_one(ChatInput).text == paste
        assert any("but the context holds" in n.message for n in app._notifications)
        assert stored(app) == [] and views(app) == []
        assert "ready" in status_line(app)

    drive(app, scenario)


# -- cancelling --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["escape", "ctrl+c"])
def test_esc_or_ctrl_c_cancels_the_answer_keeps_it_and_leaves_the_app_open(key: str, endless_gguf: Path,
                                                                           tmp_path: Path) -> None:
    app = make_app(endless_gguf, tmp_path / "sessions.sqlite3", max_tokens=100_000)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "write forever")
        await until(pilot, lambda: len(views(app, "assistant")) == 1 and len(views(app, "assistant")[0].text) > 20)
        await pilot.press(key)
        await answered(pilot)
        answer = views(app, "assistant")[0]
        assert app.is_running
        assert answer.status == "cancelled" and "cancelled" in str(answer.query_one(".role", Static).render())
        assert stored(app)[-1] == ("assistant", answer.text, "cancelled")
        assert "cancelled" in status_line(app)
        await send(pilot, "/stats")  # still working: the next thing typed is handled
        await answered(pilot)
        assert "last answer" in notes(app)[-1]

    drive(app, scenario)


def test_ctrl_c_with_nothing_to_cancel_says_how_to_quit(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        assert any("Ctrl-Q quits" in n.message for n in app._notifications)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not app.is_running

    drive(app, scenario)


def test_quitting_while_an_answer_streams_stores_it_as_cancelled(endless_gguf: Path, tmp_path: Path) -> None:
    app = make_app(endless_gguf, tmp_path / "sessions.sqlite3", max_tokens=100_000)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "write forever")
        await until(pilot, lambda: len(views(app, "assistant")) == 1 and len(views(app, "assistant")[0].text) > 5)
        await pilot.press("ctrl+q")

    drive(app, scenario)
    reopened = SessionStore(tmp_path / "sessions.sqlite3")
    messages = reopened.messages(app.conversation.session_id)
    assert messages[-1].role == "assistant" and messages[-1].status == "cancelled" and messages[-1].content


# -- provenance -----------------------------------------------------------------------------------------


def test_the_provenance_view_colours_drafted_and_target_text(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "hello")
        await answered(pilot)
        real = views(app, "assistant")[0]
        stats = app.conversation.last_stats
        assert stats is not None and real.spans.text == real.text
        # Every character the drafter got accepted is recorded as such (tiny models rarely agree with a drafter).
        assert (real.spans.share(Provenance.DRAFT) > 0) == (stats.accepted_tokens > 0)
        # The same path the generation worker takes, with chunks of both kinds: what a real pair produces.
        mixed = views(app, "assistant")[0]
        for text, who in [("def ", Provenance.TARGET), ("add(a, b):", Provenance.DRAFT), ("\n", Provenance.TARGET)]:
            await mixed.append(TextChunk(text, who))
        assert mixed.query_one(Markdown).styles.display == "block"
        assert mixed.query_one(".provenance").styles.display == "none"

        await pilot.press("ctrl+t")
        await pilot.pause()
        coloured = mixed.query_one(".provenance", Static)
        assert app.provenance_shown and coloured.styles.display == "block"
        assert mixed.query_one(Markdown).styles.display == "none"
        assert str(coloured.render()).endswith("def add(a, b):\n")  # what the view shows ...
        drawn = mixed.spans.render()  # ... drawn from this Rich text
        styles = {str(span.style) for span in drawn.spans if drawn.plain[span.start:span.end] == "add(a, b):"}
        assert styles == {DRAFT_STYLE}
        assert {str(span.style) for span in drawn.spans} >= {DRAFT_STYLE, TARGET_STYLE}

        await pilot.press("ctrl+t")
        await pilot.pause()
        assert not app.provenance_shown and mixed.query_one(Markdown).styles.display == "block"

    drive(app, scenario)
