"""Files in the full-screen chat, driven by Textual's Pilot on the tiny model: /add, /files, /drop, the
confirmation dialog of /apply (no writes nothing, y writes), /undo, and the note for a file changed on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from chat_helpers import answered, drive, make_app, notes, ready, send, until
from file_helpers import GREET, RENAMED, make_project, store_answer
from textual.pilot import Pilot

from ds4spec.faces.chat.app import ChatApp
from ds4spec.faces.chat.screens import ConfirmScreen


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "project")
    monkeypatch.chdir(root)
    return root


async def command(pilot: Pilot, line: str) -> str:
    """Runs a slash command and returns the note it left."""
    app = pilot.app
    assert isinstance(app, ChatApp)
    before = len(notes(app))
    await send(pilot, line)
    await answered(pilot)
    await until(pilot, lambda: len(notes(app)) > before, what=f"the note of {line}")
    return notes(app)[-1]


def test_add_files_and_drop_answer_in_the_conversation(tiny_bpe_gguf: Path, tmp_path: Path, project: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3", ctx=2048)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        assert (await command(pilot, "/add *.py")).startswith("added greet.py, util.py (")
        listing = (await command(pilot, "/files")).splitlines()
        assert [line.split()[0] for line in listing[:2]] == ["greet.py", "util.py"]
        assert listing[2].endswith("of the context's 2,048 tokens left")
        assert await command(pilot, "/drop util.py") == "dropped util.py"
        assert await command(pilot, "/add nowhere.py") == "no such file: nowhere.py"

    drive(app, scenario)


def test_apply_shows_the_diff_in_a_dialog_and_writes_only_on_yes(tiny_bpe_gguf: Path, tmp_path: Path,
                                                                 project: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await command(pilot, "/add greet.py")
        store_answer(app.conversation, f"greet.py\n```python\n{RENAMED}```\n")
        await command(pilot, "/apply")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen) and dialog.question == "Write this change to greet.py?"
        assert "-def hello(name):\n+def greet(name):" in dialog.diff
        await pilot.press("enter")  # the focus starts on Cancel: Enter alone never writes
        await until(pilot, lambda: notes(app)[-1] == "nothing was written", what="the refusal")
        assert (project / "greet.py").read_text() == GREET

        await command(pilot, "/apply")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the dialog")
        await pilot.press("y")
        await until(pilot, lambda: notes(app)[-1].startswith("wrote greet.py"), what="the write")
        assert (project / "greet.py").read_text() == RENAMED

        assert await command(pilot, "/undo") == "restored greet.py as it was before /apply (+2 -2 lines)"
        assert (project / "greet.py").read_text() == GREET

    drive(app, scenario)


def test_a_file_changed_on_disk_is_named_when_the_next_message_is_sent(tiny_bpe_gguf: Path, tmp_path: Path,
                                                                       project: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3", ctx=2048)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await command(pilot, "/add greet.py")
        (project / "greet.py").write_text(RENAMED)
        await send(pilot, "What changed?")
        await answered(pilot)
        assert "greet.py changed on disk: the model sees it as it is now" in notes(app)

    drive(app, scenario)


def test_an_at_path_in_a_message_attaches_the_file_to_it(tiny_bpe_gguf: Path, tmp_path: Path,
                                                         project: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3", ctx=2048)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "What does @greet.py print?")
        await answered(pilot)
        question = app.conversation.history()[0]
        assert question.content == "What does @greet.py print?"
        assert question.files is not None and [a["text"] for a in question.files["attached"]] == [GREET]

    drive(app, scenario)
