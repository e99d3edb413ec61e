"""Driving `ds4spec repl` in a real pseudo-terminal, as a person would: what the REPL's tests share."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from ds4spec.faces.shared.sessions import SessionStore, StoredMessage

PROMPT = "you>"  # prompt-toolkit draws the prompt's trailing space as a cursor move
STATS = re.compile(r"\[\d+ tokens, [\d.]+ tokens/s · [^\]]*\]")
ANSI = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07)")


class Repl:
    """One REPL process in a pseudo-terminal; ``output`` is everything it has written so far."""

    def __init__(self, model: Path, home: Path, *args: str, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        # PROMPT_TOOLKIT_NO_CPR: pexpect does not answer cursor-position requests as a terminal would.
        full_env.update({"DS4SPEC_HOME": str(home), "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"})
        full_env.update(env or {})
        self.log: list[str] = []
        self.child = pexpect.spawn(
            sys.executable, ["-m", "ds4spec", "repl", "--target", str(model), "--draft", "lookup", "--warmup", "0",
                             *args],
            env=full_env, encoding="utf-8", codec_errors="replace", timeout=60, dimensions=(40, 200), cwd=cwd,
        )
        self.child.logfile_read = self  # type: ignore[assignment]

    def write(self, data: str) -> None:  # pexpect's log hook
        self.log.append(data)

    def flush(self) -> None:
        pass

    @property
    def output(self) -> str:
        return "".join(self.log)

    @property
    def text(self) -> str:
        """The output without escape sequences and with the terminal's CRLF as LF."""
        return ANSI.sub("", self.output).replace("\r\n", "\n")

    def expect(self, pattern: str | re.Pattern[str]) -> None:
        self.child.expect(pattern)

    def expect_exact(self, text: str) -> None:
        self.child.expect_exact(text)

    def type(self, keys: str) -> None:
        """Waits for the prompt, then types: keys typed while an answer streams would reach the terminal's
        line discipline rather than the editor."""
        self.child.expect_exact(PROMPT)
        self.child.send(keys)

    def exit(self) -> int:
        self.child.expect_exact(PROMPT)
        self.child.sendcontrol("d")
        self.child.expect(pexpect.EOF)
        self.child.close()
        return int(self.child.exitstatus if self.child.exitstatus is not None else -1)


@pytest.fixture
def spawned() -> Iterator[list[Repl]]:
    started: list[Repl] = []
    yield started
    for repl in started:  # a failed test must not leave a generating process behind
        if repl.child.isalive():
            repl.child.terminate(force=True)


def start(spawned: list[Repl], model: Path, home: Path, *args: str, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> Repl:
    repl = Repl(model, home, *args, env=env, cwd=cwd)
    spawned.append(repl)
    return repl


def stored(home: Path) -> list[StoredMessage]:
    store = SessionStore(home / "sessions.sqlite3")
    try:
        latest = store.latest()
        assert latest is not None
        return store.messages(latest)
    finally:
        store.close()
