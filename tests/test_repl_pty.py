"""`ds4spec repl` driven in a real pseudo-terminal, as a person would: type, read the streamed answer, press
Ctrl-C and Ctrl-D. What the REPL promised to store is then read back from the session file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from repl_helpers import PROMPT, STATS, Repl, spawned, start, stored
from tinymodel import build_tiny_gguf

from ds4spec.faces.shared.sessions import SessionStore
from ds4spec.faces.shared.visible import visible

__all__ = ["spawned"]  # a fixture: imported so that the tests here can ask for it
SGR_WITH_STYLE = re.compile(r"\x1b\[[0-9;]*[1-9][0-9;]*m")  # any colour or attribute; a bare reset is fine


@pytest.fixture(scope="module")
def endless(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Never ends by itself, and its context is long enough that only Ctrl-C stops it in time."""
    return build_tiny_gguf(tmp_path_factory.mktemp("endless") / "endless.gguf", never_ends=True,
                           context_length=16384)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_a_question_gets_a_streamed_answer_then_a_stats_line(tiny_bpe_gguf: Path, home: Path,
                                                             spawned: list[Repl]) -> None:
    repl = start(spawned, tiny_bpe_gguf, home, "--max-tokens", "40")
    repl.type("What is a closure?\r")
    repl.expect(STATS)
    assert repl.exit() == 0
    question, answer = stored(home)
    assert (question.content, answer.status) == ("What is a closure?", "done")
    assert answer.content and visible(answer.content) in repl.text
    assert repl.text.index(visible(answer.content)) < STATS.search(repl.text).start()  # type: ignore[union-attr]


def test_ctrl_c_stops_a_never_ending_answer_and_keeps_it(endless: Path, home: Path, spawned: list[Repl]) -> None:
    repl = start(spawned, endless, home, "--ctx", "16384", "--max-tokens", "100000")
    repl.type("Count forever\r")
    repl.expect_exact("\x1b[?2004l")  # the editor let go of the terminal: the answer starts streaming
    streamed = len(repl.output)
    while len(repl.output) - streamed < 200:  # wait until some of the answer is on the screen
        repl.child.read_nonblocking(200, timeout=30)
    repl.child.sendintr()
    repl.expect_exact("(stopped; the answer so far is kept)")
    repl.expect(STATS)
    repl.type("/stats\r")  # the REPL is alive and the answer's statistics were kept
    repl.expect_exact("session: 1 answers")
    assert repl.exit() == 0
    _question, answer = stored(home)
    assert answer.status == "cancelled" and len(answer.content) > 20
    # Everything stored was shown, and the other way round: the first Ctrl-C asks the engine to stop
    # between cycles, so it never lands between storing a chunk and showing it; nor does the terminal
    # echo "^C" into the answer.
    assert visible(answer.content) in repl.text
    assert "^C" not in repl.text
    assert "cancelled]" in repl.text


def test_keys_typed_while_an_answer_streams_are_not_echoed_into_it_but_wait_for_the_next_prompt(
        endless: Path, home: Path, spawned: list[Repl]) -> None:
    """The answer never ends by itself, so it is still streaming when the keys arrive, however slow the machine:
    the Ctrl-C sent after them finds it running (it is stored as cancelled), and only then does it stop."""
    repl = start(spawned, endless, home, "--ctx", "16384", "--max-tokens", "100000")
    repl.type("Count forever\r")
    repl.expect_exact("\x1b[?2004l")  # the answer starts streaming
    repl.child.send("typed ahead")
    streamed = len(repl.output)
    while len(repl.output) - streamed < 200:  # more of the answer arrives after the keys
        repl.child.read_nonblocking(200, timeout=30)
    repl.child.sendintr()
    repl.expect_exact("(stopped; the answer so far is kept)")
    repl.expect(STATS)
    repl.expect_exact(PROMPT)
    repl.expect_exact("typed ahead")  # the editor drew it as the next message's start
    answer_on_screen = repl.text[: repl.text.rindex(PROMPT)]
    answer = stored(home)[-1]
    assert answer.status == "cancelled", "the answer had ended before the keys were typed"
    assert "typed ahead" not in answer_on_screen and "typed ahead" not in answer.content
    repl.child.sendintr()  # discards the line, so that Ctrl-D exits
    repl.expect_exact("(Ctrl-D exits)")
    assert repl.exit() == 0


def test_ctrl_c_at_the_prompt_does_not_exit_but_ctrl_d_does(tiny_bpe_gguf: Path, home: Path,
                                                             spawned: list[Repl]) -> None:
    repl = start(spawned, tiny_bpe_gguf, home)
    repl.type("half a thought")
    repl.child.sendintr()
    repl.expect_exact("(Ctrl-D exits)")
    repl.type("/help\r")
    repl.expect_exact("/save FILE")
    assert repl.exit() == 0


def test_slash_commands_answer_in_place(tiny_bpe_gguf: Path, home: Path, spawned: list[Repl]) -> None:
    repl = start(spawned, tiny_bpe_gguf, home, "--max-tokens", "10")
    repl.type("/system Be brief.\r")
    repl.expect_exact("set the system prompt")
    repl.type("/nosuch\r")
    repl.expect_exact("unknown command /nosuch; /help lists the commands")
    repl.type("Hello\r")
    repl.expect(STATS)
    repl.type("/copy\r")
    repl.expect_exact("\x1b]52;c;")  # OSC 52: the terminal's clipboard
    repl.expect_exact("copied the last answer")
    repl.type("/spec off\r")
    repl.expect_exact("plain decoding (lookup is loaded but idle)")
    assert repl.exit() == 0


def test_empty_message_gets_a_notice_and_alt_enter_adds_a_line(tiny_bpe_gguf: Path, home: Path,
                                                                spawned: list[Repl]) -> None:
    repl = start(spawned, tiny_bpe_gguf, home, "--max-tokens", "5")
    repl.type("   \r")
    repl.expect_exact("(empty message: nothing sent)")
    repl.type("line one\x1b\rline two\r")  # Alt-Enter reaches the program as Esc, Enter
    repl.expect(STATS)
    assert repl.exit() == 0
    assert stored(home)[0].content == "line one\nline two"


def test_a_message_too_long_for_the_context_is_kept_in_the_prompt(tiny_bpe_gguf: Path, home: Path,
                                                                  spawned: list[Repl]) -> None:
    repl = start(spawned, tiny_bpe_gguf, home, "--ctx", "64")
    repl.type("x = 1 " * 60 + "\r")
    repl.expect_exact("it is back in the prompt to edit")
    repl.type("\r")  # sent again as it was: the same refusal
    repl.expect_exact("it is back in the prompt to edit")
    assert re.search(r"the prompt is \d+ tokens but the context holds \d+", repl.text)
    repl.expect_exact(PROMPT)
    repl.child.sendintr()  # discard it
    repl.expect_exact("(Ctrl-D exits)")
    assert repl.exit() == 0
    store = SessionStore(home / "sessions.sqlite3")
    assert store.sessions() == []  # nothing was stored
    store.close()


def test_dumb_terminal_gets_no_escape_sequences(tiny_bpe_gguf: Path, home: Path, spawned: list[Repl]) -> None:
    repl = start(spawned, tiny_bpe_gguf, home, "--max-tokens", "20", env={"TERM": "dumb"})
    repl.type("Hello\r")
    repl.expect(STATS)
    repl.type("/copy\r")
    repl.expect_exact("no clipboard on this terminal")
    assert repl.exit() == 0
    assert "\x1b" not in repl.output


def test_no_color_keeps_the_editor_but_drops_colours(tiny_bpe_gguf: Path, home: Path,
                                                      spawned: list[Repl]) -> None:
    repl = start(spawned, tiny_bpe_gguf, home, "--max-tokens", "20", env={"NO_COLOR": "1"})
    repl.type("Hello\r")
    repl.expect(STATS)
    assert repl.exit() == 0
    assert not SGR_WITH_STYLE.search(repl.output), repl.output


def test_resume_continues_the_latest_session(tiny_bpe_gguf: Path, home: Path, spawned: list[Repl]) -> None:
    first = start(spawned, tiny_bpe_gguf, home, "--max-tokens", "5")
    first.type("Remember me\r")
    first.expect(STATS)
    assert first.exit() == 0
    [session] = [line for line in _sessions(home).splitlines() if "Remember me" in line]
    session_id = session.split()[0].lstrip("#")
    again = start(spawned, tiny_bpe_gguf, home, "--resume")
    again.expect_exact("Remember me")
    assert f"session {session_id}" in again.text and "you: Remember me" in again.text
    assert again.exit() == 0


def test_a_damaged_session_file_is_named_and_the_repl_starts(tiny_bpe_gguf: Path, home: Path,
                                                               spawned: list[Repl]) -> None:
    home.mkdir(parents=True)
    (home / "sessions.sqlite3").write_bytes(b"not a database" * 100)
    repl = start(spawned, tiny_bpe_gguf, home, "--max-tokens", "5")
    repl.expect_exact("ds4spec: warning: ")
    repl.type("Still works\r")
    repl.expect(STATS)
    assert repl.exit() == 0
    assert f"{home / 'sessions.sqlite3'} was damaged" in repl.text and "moved it aside" in repl.text
    assert stored(home)[0].content == "Still works"


def _sessions(home: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "repl", "--sessions"], capture_output=True, text=True,
                          env={**os.environ, "DS4SPEC_HOME": str(home)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_model_that_fails_to_load_is_one_line_and_exit_1(home: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "repl", "--target", str(home / "missing.gguf")],
                          capture_output=True, text=True, env={**os.environ, "DS4SPEC_HOME": str(home)}, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ds4spec: error: ") and "missing.gguf" in proc.stderr
