"""Slash commands on a real conversation over the tiny model: what each one changes and what it says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ds4spec.core.events import Finished
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error, UsageError
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.sessions import SessionStore
from ds4spec.faces.shared.slash import COMMANDS, is_command, run_command


@pytest.fixture(scope="module")
def engine(tiny_bpe_gguf: Path) -> Iterator[Engine]:
    with Engine.load(Settings(target=str(tiny_bpe_gguf), draft="lookup", warmup=0, max_tokens=16)) as e:
        yield e


@pytest.fixture
def conv(engine: Engine, tmp_path: Path) -> Iterator[Conversation]:
    store = SessionStore(tmp_path / "sessions.sqlite3")
    yield Conversation(engine, store)
    engine.set_draft("lookup")
    store.close()


@pytest.mark.parametrize(("line", "command"), [
    ("/help", True), ("  /save notes.md", True), ("/system Be\nbrief.", True), ("/nosuch", True),
    ("/usr/bin/python crashes", False), ("hello /help", False), ("/", False), ("// comment", False),
])
def test_what_counts_as_a_command(line: str, command: bool) -> None:
    assert is_command(line) is command


def test_an_unknown_command_is_a_one_line_usage_error(conv: Conversation) -> None:
    with pytest.raises(UsageError, match=r"unknown command /nosuch; /help lists"):
        run_command("/nosuch", conv)


def test_help_lists_every_command(conv: Conversation) -> None:
    text = run_command("/help", conv).message
    assert all(f"/{name}" in text for name in COMMANDS) and "/save FILE" in text


def test_new_starts_another_session_and_asks_for_a_redraw(conv: Conversation) -> None:
    list(conv.send("hi"))
    old = conv.session_id
    result = run_command("/new", conv)
    assert result.cleared and conv.session_id != old and conv.history() == []


def test_clear_empties_the_session(conv: Conversation) -> None:
    list(conv.send("hi"))
    assert run_command("/clear", conv).cleared and conv.history() == []
    with pytest.raises(UsageError, match="takes no argument"):
        run_command("/clear everything", conv)


def test_save_writes_markdown(conv: Conversation, tmp_path: Path) -> None:
    list(conv.send("What is 2+2?"))
    result = run_command(f"/save {tmp_path}/chat.md", conv)
    assert str(tmp_path / "chat.md") in result.message
    assert "## You\n\nWhat is 2+2?" in (tmp_path / "chat.md").read_text()


def test_save_needs_a_writable_file_name(conv: Conversation, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs a file name"):
        run_command("/save", conv)
    with pytest.raises(UsageError, match=r"is a directory; /save needs a file name, as in /save .*/notes\.md$"):
        run_command(f"/save {tmp_path}", conv)
    with pytest.raises(UsageError, match=r"^new/ is a directory"):
        run_command("/save new/", conv)  # it wrote a file named ``new``
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="cannot write"):
        run_command(f"/save {tmp_path}/file/chat.md", conv)  # a file where a folder must be


def test_save_over_an_existing_file_asks_first(conv: Conversation, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("my notes\n")
    list(conv.send("What is 2+2?"))
    result = run_command(f"/save {notes}", conv)
    assert result.confirm is not None and result.confirm.question == f"Replace {notes} with the conversation?"
    assert notes.read_text() == "my notes\n"  # nothing before the yes
    assert result.confirm.accept() == f"saved the conversation to {notes}"
    assert "## You\n\nWhat is 2+2?" in notes.read_text()


def test_save_never_writes_over_a_file_in_the_conversation(conv: Conversation, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("print(1)\n")
    run_command("/add app.py", conv)
    with pytest.raises(UsageError, match=r"^app\.py is in the conversation; /save writes the conversation to"):
        run_command("/save app.py", conv)
    assert (tmp_path / "app.py").read_text() == "print(1)\n"


def test_spec_switches_speculation_off_and_on(conv: Conversation, engine: Engine) -> None:
    assert run_command("/spec", conv).message == "speculating with lookup"
    assert run_command("/spec off", conv).message == "plain decoding (lookup is loaded but idle)"
    assert not engine.speculating
    run_command("/spec on", conv)
    assert engine.speculating
    with pytest.raises(UsageError, match="on or off"):
        run_command("/spec maybe", conv)


def test_draft_swaps_the_drafter(conv: Conversation, engine: Engine, tiny_spm_gguf: Path) -> None:
    assert run_command("/draft none", conv).message == "no drafter: plain decoding"
    assert engine.drafter is None
    with pytest.raises(UsageError, match="no drafter is loaded"):
        run_command("/spec on", conv)
    assert run_command(f"/draft {tiny_spm_gguf}", conv).message.startswith("speculating with ")
    assert engine.speculating and isinstance(list(conv.send("hi"))[-1], Finished)
    with pytest.raises(Ds4Error) as err:
        run_command("/draft /no/such/model.gguf", conv)
    assert len(str(err.value).splitlines()) == 1
    assert engine.drafter_name is not None  # a failed swap leaves the old drafter


def test_stats_shows_the_last_answer_and_the_session_totals(conv: Conversation) -> None:
    assert "no answer yet" in run_command("/stats", conv).message
    list(conv.send("one"))
    list(conv.send("two"))
    text = run_command("/stats", conv).message
    assert "last answer: prompt " in text and "tokens/s" in text
    assert "session: 2 answers" in text and "drafter lookup" in text


def test_system_sets_shows_and_removes_the_system_prompt(conv: Conversation) -> None:
    assert "no system prompt" in run_command("/system", conv).message
    run_command("/system Answer in French.\nBe brief.", conv)
    assert conv.system == "Answer in French.\nBe brief."
    assert run_command("/system", conv).message == "system prompt: Answer in French.\nBe brief."
    run_command("/system -", conv)
    assert conv.system is None


def test_copy_puts_the_last_code_block_on_the_clipboard(conv: Conversation) -> None:
    with pytest.raises(UsageError, match="nothing to copy"):
        run_command("/copy", conv)
    conv.store.add_message(conv.session_id, "assistant", "Plain words")
    assert run_command("/copy", conv).clipboard == "Plain words"
    conv.store.add_message(conv.session_id, "assistant", "Run:\n```sh\nmake\nmake test\n```\n")
    result = run_command("/copy", conv)
    assert result.clipboard == "make\nmake test\n" and "2 lines" in result.message


def test_engine_commands_wait_for_the_model(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.sqlite3")
    conv = Conversation(None, store)
    for line in ("/spec off", "/draft none"):
        with pytest.raises(UsageError, match="still loading"):
            run_command(line, conv)
    assert "no answer yet" in run_command("/stats", conv).message
    store.close()
