"""Files in `ds4spec repl`, in a real pseudo-terminal on the tiny model: Tab completes paths, /add and /files
answer, @path attaches a file to its message, /apply shows the coloured diff and asks (n writes nothing, y
writes), /undo restores, and a resumed session names its files."""

from __future__ import annotations

from pathlib import Path

import pytest
from file_helpers import GREET, RENAMED, make_project, store_answer
from repl_helpers import STATS, Repl, spawned, start, stored

from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.sessions import SessionStore
from ds4spec.faces.shared.slash import run_command

__all__ = ["spawned"]  # a fixture: imported so that the tests here can ask for it
GREEN_ADDED = "\x1b[32m+def greet(name):"  # Pygments' terminal colours for an added diff line


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "project")
    monkeypatch.chdir(root)  # the session prepared here names the files as the REPL will
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def answered_session(home: Path, answer: str) -> None:
    """A stored session with greet.py in it and ``answer`` as its last answer, for ``--resume``."""
    home.mkdir(parents=True, exist_ok=True)
    store = SessionStore(home / "sessions.sqlite3")
    conv = Conversation(None, store)
    run_command("/add greet.py", conv)
    store_answer(conv, answer)
    store.close()


def test_tab_completes_a_path_after_add_and_files_lists_it(tiny_bpe_gguf: Path, home: Path, project: Path,
                                                           spawned: list[Repl]) -> None:
    repl = start(spawned, tiny_bpe_gguf, home, cwd=project)
    repl.type("/add gr\t")
    repl.expect_exact("eet.py")  # completed in place
    repl.child.send("\r")
    repl.expect(r"added greet\.py \(\d+ tokens; [\d,]+ of the context's [\d,]+ tokens left\)")
    repl.type("/files\r")
    repl.expect(r"greet\.py +\d+ tokens")
    repl.type("/drop greet.py\r")
    repl.expect_exact("dropped greet.py")
    repl.type("/add missing.py\r")
    repl.expect_exact("ds4spec: no such file: missing.py")
    assert repl.exit() == 0


def test_an_at_path_attaches_the_file_to_that_message(tiny_bpe_gguf: Path, home: Path, project: Path,
                                                      spawned: list[Repl]) -> None:
    repl = start(spawned, tiny_bpe_gguf, home, "--max-tokens", "6", cwd=project)
    repl.type("Explain @greet.py please\r")
    repl.expect(STATS)
    assert repl.exit() == 0
    question = stored(home)[0]
    assert question.content == "Explain @greet.py please"
    assert question.files is not None and [a["text"] for a in question.files["attached"]] == [GREET]


def test_apply_shows_the_diff_asks_and_writes_only_on_yes_then_undo_restores(
        tiny_bpe_gguf: Path, home: Path, project: Path, spawned: list[Repl]) -> None:
    answered_session(home, f"greet.py\n```python\n{RENAMED}```\n")
    repl = start(spawned, tiny_bpe_gguf, home, "--resume", cwd=project)
    repl.expect_exact("files in the conversation: greet.py")
    repl.type("/apply\r")
    repl.expect_exact("greet.py: +2 -2 lines")
    repl.expect_exact(GREEN_ADDED)
    repl.expect_exact("Write this change to greet.py?")
    repl.child.send("n")
    repl.expect_exact("nothing was written")
    assert (project / "greet.py").read_text() == GREET
    repl.type("/apply\r")
    repl.expect_exact("Write this change to greet.py?")
    repl.child.send("y")
    repl.expect_exact("wrote greet.py (+2 -2 lines); /undo restores it")
    assert (project / "greet.py").read_text() == RENAMED
    repl.type("/undo\r")
    repl.expect_exact("restored greet.py as it was before /apply (+2 -2 lines)")
    assert (project / "greet.py").read_text() == GREET
    assert repl.exit() == 0


def test_a_resumed_session_says_which_files_are_gone(tiny_bpe_gguf: Path, home: Path, project: Path,
                                                     spawned: list[Repl]) -> None:
    answered_session(home, "Fine.")
    (project / "greet.py").unlink()
    repl = start(spawned, tiny_bpe_gguf, home, "--resume", cwd=project)
    repl.expect_exact("greet.py is gone: dropped it from the conversation")
    assert repl.exit() == 0
