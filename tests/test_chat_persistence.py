"""A killed chat loses nothing that was on screen: the real `ds4spec chat` process in a real terminal (tmux).

The test types a message to a tiny model that never stops answering, waits until the answer is on screen,
reads the screen, kills the process with SIGKILL, and then finds every character it read in the session
file, and the answer again in `ds4spec chat --resume`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tinymodel import build_tiny_gguf

from ds4spec.faces.shared.sessions import SessionStore
from ds4spec.faces.shared.visible import visible

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")
# Room for a few thousand characters of answer below its header: the answer streams without end, and the test
# must catch the header and the text under it on one screen before the header scrolls away, however slow the machine.
WIDTH, HEIGHT = 160, 50


class Terminal:
    """One tmux server of our own (its own socket), holding one window of WIDTHxHEIGHT."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], check=True,
                              capture_output=True, text=True, timeout=30).stdout

    def start(self, command: list[str], env: dict[str, str]) -> None:
        assignments = [f"{k}={v}" for k, v in env.items()]
        # exec: the pane's process is ds4spec itself, so that SIGKILL hits it and no shell is left to clean up.
        line = " ".join(["exec", "env", *map(_quote, assignments), *map(_quote, command)])
        self.tmux("new-session", "-d", "-s", "chat", "-x", str(WIDTH), "-y", str(HEIGHT), line)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "chat")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", "chat", *(["-l"] if literal else []), *keys)

    def pid(self) -> int:
        return int(self.tmux("display-message", "-p", "-t", "chat", "#{pane_pid}").strip())

    def wait_for(self, condition: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if condition(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")
            time.sleep(0.05)

    def kill_server(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


@pytest.fixture
def terminals(tmp_path: Path) -> Iterator[Callable[[], Terminal]]:
    """Makes terminals, each on a tmux server of its own; all are killed at the end."""
    made: list[Terminal] = []

    def make() -> Terminal:
        made.append(Terminal(f"ds4spec-test-{os.getpid()}-{tmp_path.name}-{len(made)}"))
        return made[-1]

    try:
        yield make
    finally:
        for term in made:
            term.kill_server()


def answer_on_screen(screen: str) -> str:
    """The answer's text as drawn in the provenance view: the lines between its header and the input ("" while
    its header is not on the screen)."""
    lines = screen.splitlines()
    start = max((i for i, line in enumerate(lines) if line.strip().startswith("assistant")), default=None)
    if start is None:
        return ""
    body: list[str] = []
    for line in lines[start + 1:]:
        if "▔" in line or "Message ·" in line:  # the input box's top edge: the conversation ends above it
            break
        body.append(line)
    return "\n".join(body)


def comparable(text: str) -> str:
    """Printable ASCII without spaces: wrapping and wide characters change how a screen spells the rest."""
    return "".join(c for c in visible(text) if 33 <= ord(c) < 127)


def test_killing_the_chat_mid_answer_keeps_everything_that_was_on_screen(terminals: Callable[[], Terminal],
                                                                          tmp_path: Path) -> None:
    model = build_tiny_gguf(tmp_path / "endless.gguf", never_ends=True)
    home = tmp_path / "home"
    env = {"DS4SPEC_HOME": str(home), "TERM": "xterm-256color", "PYTHONPATH": str(Path(__file__).parents[1])}
    chat = [sys.executable, "-m", "ds4spec", "chat", "--target", str(model), "--draft", "lookup",
            "--warmup", "0", "--max-tokens", "100000"]
    terminal = terminals()
    terminal.start(chat, env)
    terminal.wait_for(lambda s: "· ready" in s, "the model to load")
    terminal.keys("C-t")  # the provenance view shows the answer's characters as they are, without markdown
    terminal.keys("Tell me everything", literal=True)
    terminal.keys("Enter")
    # The screen that showed it, not a later one: the answer goes on streaming meanwhile.
    shown = terminal.wait_for(lambda s: "generating" in s and len(comparable(answer_on_screen(s))) > 40,
                              "the answer to appear")
    os.kill(terminal.pid(), signal.SIGKILL)
    on_screen = comparable(answer_on_screen(shown))
    assert "generating" in shown and len(on_screen) > 40

    store = SessionStore(home / "sessions.sqlite3")
    session = store.latest()
    assert session is not None
    user, answer = store.messages(session)
    assert (user.role, user.content) == ("user", "Tell me everything")
    assert answer.role == "assistant" and answer.status == "streaming"  # it died while writing
    assert on_screen in comparable(answer.content), "text that was on screen is missing from the session file"
    store.close()

    again = terminals()
    again.start([*chat, "--resume"], env)
    reopened = again.wait_for(lambda s: "· ready" in s, "the resumed chat to load")
    assert "Tell me everything" in reopened and "assistant · cancelled" in reopened
    pid = again.pid()
    again.keys("C-q")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid), "Ctrl-Q must quit"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
