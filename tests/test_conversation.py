"""A conversation on the tiny model: what is stored, when, and what the model is shown on the next turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tinymodel import build_tiny_gguf

from ds4spec.backend.prompt import ChatMessage
from ds4spec.core.events import Event, Finished, FinishReason, TextChunk
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.errors import InputError
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.sessions import SessionStore


@pytest.fixture(scope="module")
def engine(tiny_bpe_gguf: Path) -> Iterator[Engine]:
    with Engine.load(Settings(target=str(tiny_bpe_gguf), draft="lookup", warmup=0, max_tokens=24,
                              ctx=256)) as e:
        yield e


@pytest.fixture(scope="module")
def endless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path = build_tiny_gguf(tmp_path_factory.mktemp("endless") / "endless.gguf", never_ends=True)
    with Engine.load(Settings(target=str(path), draft="none", max_tokens=2000)) as e:
        yield e


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    s = SessionStore(tmp_path / "sessions.sqlite3")
    yield s
    s.close()


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextChunk))


def test_send_stores_the_question_and_the_streamed_answer(engine: Engine, store: SessionStore) -> None:
    conv = Conversation(engine, store)
    events = list(conv.send("What is a closure?"))
    assert isinstance(events[-1], Finished) and events[-1].reason in (FinishReason.EOG, FinishReason.LENGTH)
    question, answer = conv.history()
    assert (question.role, question.content, question.status) == ("user", "What is a closure?", "done")
    assert (answer.role, answer.content, answer.status) == ("assistant", text_of(events), "done")
    assert conv.last_stats is events[-1].stats
    assert store.stats(conv.session_id)[0]["committed_tokens"] == events[-1].stats.committed_tokens


def test_each_chunk_is_stored_before_the_face_sees_it(engine: Engine, store: SessionStore) -> None:
    conv = Conversation(engine, store)
    shown = ""
    for event in conv.send("Hello"):
        if isinstance(event, TextChunk):
            shown += event.text
            assert conv.history()[-1].content == shown
            assert conv.history()[-1].status == "streaming"


def test_the_next_turn_shows_the_model_the_whole_conversation(engine: Engine, store: SessionStore) -> None:
    conv = Conversation(engine, store)
    conv.set_system("Be brief.")
    first = text_of(list(conv.send("one")))
    assert conv.messages() == [ChatMessage("system", "Be brief."), ChatMessage("user", "one"),
                               ChatMessage("assistant", first)]
    before = engine.chat_prompt([*conv.messages(), ChatMessage("user", "two")]).tokens
    events = list(conv.send("two"))
    assert isinstance(events[-1], Finished) and events[-1].stats.prompt_tokens == len(before)


def test_an_empty_message_is_refused_and_nothing_is_stored(engine: Engine, store: SessionStore) -> None:
    conv = Conversation(engine, store)
    with pytest.raises(InputError, match="empty"):
        conv.send("  \n ")
    assert conv.history() == []


def test_a_message_read_from_bytes_that_are_not_utf8_is_refused_and_nothing_is_stored(engine: Engine,
                                                                                      store: SessionStore) -> None:
    """Piped into the REPL, bytes that are not UTF-8 arrive as their escapes (``surrogateescape``): a traceback out of
    the prompt's encoding, the REPL gone."""
    conv = Conversation(engine, store)
    text = b"bad \xff\xfe bytes".decode("utf-8", "surrogateescape")
    with pytest.raises(InputError, match=r"^the message is not UTF-8 text \(byte 0xff at character 4\)$"):
        conv.send(text)
    assert conv.history() == []


def test_a_conversation_that_no_longer_fits_is_refused_and_nothing_is_stored(engine: Engine,
                                                                            store: SessionStore) -> None:
    conv = Conversation(engine, store)
    with pytest.raises(InputError, match="context holds 256"):
        conv.send("x = 1\n" * 300)
    assert conv.history() == []


def test_cancel_mid_answer_keeps_what_was_streamed(endless: Engine, store: SessionStore) -> None:
    conv = Conversation(endless, store)
    events: list[Event] = []
    for event in conv.send("count", cancelled=lambda: len(events) >= 5):  # the stop button, pressed
        events.append(event)
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.reason is FinishReason.CANCELLED
    answer = conv.history()[-1]
    assert (answer.content, answer.status) == (text_of(events), "cancelled") and answer.content
    assert conv.messages()[-1] == ChatMessage("assistant", answer.content)  # the model sees it next turn


def test_ctrl_c_during_generation_keeps_the_partial_answer(endless: Engine, store: SessionStore) -> None:
    conv = Conversation(endless, store)
    answering = len(endless.chat_prompt(conv.messages("count")).tokens) + 8  # the context once 8 tokens are written

    def interrupt_while_answering() -> bool:  # where Ctrl-C lands while llama.cpp computes
        if endless.target.n_past >= answering:
            raise KeyboardInterrupt
        return False

    events = list(conv.send("count", cancelled=interrupt_while_answering))
    assert isinstance(events[-1], Finished) and events[-1].reason is FinishReason.CANCELLED
    assert conv.history()[-1].status == "cancelled" and conv.history()[-1].content == text_of(events) != ""


def test_ctrl_c_in_the_face_stops_the_engine_and_reports_its_statistics(endless: Engine,
                                                                         store: SessionStore) -> None:
    conv = Conversation(endless, store)
    stream = conv.send("count")
    shown = [next(stream) for _ in range(4)]
    finished = stream.throw(KeyboardInterrupt())  # type: ignore[attr-defined]  # as the REPL passes it on
    assert isinstance(finished, Finished) and finished.reason is FinishReason.CANCELLED
    assert finished.stats.committed_tokens >= len(shown) and conv.last_stats is finished.stats
    assert list(stream) == []
    assert (conv.history()[-1].content, conv.history()[-1].status) == (text_of(shown), "cancelled")
    assert store.stats(conv.session_id)[-1]["committed_tokens"] == finished.stats.committed_tokens


def test_a_face_that_stops_reading_leaves_the_answer_cancelled(endless: Engine, store: SessionStore) -> None:
    conv = Conversation(endless, store)
    stream = conv.send("count")
    shown = ""
    for event in stream:
        if isinstance(event, TextChunk):
            shown += event.text
            if len(shown) > 10:
                break
    stream.close()  # type: ignore[attr-defined]
    assert (conv.history()[-1].content, conv.history()[-1].status) == (shown, "cancelled")
    assert list(conv.send("again", cancelled=lambda: True))  # the engine is free for the next turn


def test_an_answer_the_engine_fails_on_is_stored_as_error(endless: Engine, tmp_path: Path) -> None:
    first = Conversation(endless, SessionStore(tmp_path / "a.sqlite3"))
    busy = first.send("count")
    next(busy)  # the engine is generating for the first conversation
    second = Conversation(endless, SessionStore(tmp_path / "b.sqlite3"))
    with pytest.raises(RuntimeError, match="one generation at a time"):
        list(second.send("me too"))
    assert second.history()[-1].status == "error" and second.messages() == []
    busy.close()  # type: ignore[attr-defined]
    assert first.history()[-1].status == "cancelled"
    first.store.close()
    second.store.close()


def test_a_failed_answer_is_kept_in_history_but_not_shown_to_the_model(engine: Engine,
                                                                         store: SessionStore) -> None:
    conv = Conversation(engine, store)
    store.add_message(conv.session_id, "user", "lost question")
    store.add_message(conv.session_id, "assistant", "half", status="error")
    store.add_message(conv.session_id, "user", "question with no answer yet")
    assert len(conv.history()) == 3 and conv.messages() == []


def test_resuming_a_session_settles_an_answer_left_streaming(engine: Engine, store: SessionStore) -> None:
    sid = store.new_session()
    store.add_message(sid, "user", "q")
    store.add_message(sid, "assistant", "shown before the kill", status="streaming")
    conv = Conversation(engine, store, sid)
    assert conv.history()[-1].status == "cancelled"
    assert conv.messages()[-1] == ChatMessage("assistant", "shown before the kill")


def test_resuming_restores_the_last_answers_statistics(engine: Engine, store: SessionStore) -> None:
    first = Conversation(engine, store)
    list(first.send("hi"))
    assert first.last_stats is not None
    again = Conversation(engine, store, first.session_id)
    assert again.last_stats is not None
    assert again.last_stats.committed_tokens == first.last_stats.committed_tokens


def test_resuming_an_unknown_session_is_an_input_error(engine: Engine, store: SessionStore) -> None:
    with pytest.raises(InputError, match="no session 99"):
        Conversation(engine, store, 99)


def test_the_engine_may_be_attached_after_the_conversation_opens(engine: Engine, store: SessionStore) -> None:
    conv = Conversation(None, store)
    with pytest.raises(InputError, match="still loading"):
        conv.send("hi")
    conv.engine = engine
    assert isinstance(list(conv.send("hi"))[-1], Finished)


def test_new_starts_another_session_with_the_same_system_prompt(engine: Engine, store: SessionStore) -> None:
    conv = Conversation(engine, store)
    conv.set_system("Be brief.")
    list(conv.send("hi"))
    old = conv.session_id
    conv.new()
    assert conv.session_id != old and conv.history() == [] and conv.system == "Be brief."
    assert len(store.messages(old)) == 2


def test_markdown_export_closes_a_code_block_the_answer_was_cut_off_in(store: SessionStore,
                                                                          tmp_path: Path) -> None:
    conv = Conversation(None, store)
    conv.set_system("Be brief.")
    store.add_message(conv.session_id, "user", "Show me")
    store.add_message(conv.session_id, "assistant", "Here:\n~~~~python\nprint(1)\n", status="cancelled")
    text = conv.save_markdown(tmp_path / "out" / "chat.md").read_text()
    assert "## System\n\nBe brief." in text and "## You\n\nShow me" in text
    assert "## Assistant (cancelled)\n\nHere:\n~~~~python\nprint(1)\n~~~~\n" in text


def test_last_code_block_is_taken_from_the_latest_answer_that_has_one(store: SessionStore) -> None:
    conv = Conversation(None, store)
    assert conv.last_code_block() is None
    store.add_message(conv.session_id, "assistant", "```py\nold()\n```\n")
    store.add_message(conv.session_id, "assistant", "```sh\nls\n```\ntext\n```python\nnew()\n```\n")
    store.add_message(conv.session_id, "assistant", "no code here")
    assert conv.last_code_block() == "new()\n"
