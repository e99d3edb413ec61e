"""The editor clients in the repository against the real server on a tiny model: Neovim, Vim and Emacs.

Neovim loads the plugin from editors/nvim, asks for a completion at the cursor, shows it as ghost text,
accepts it into the buffer and writes the file; the file must then hold exactly what the engine produces
for the same text before and after the cursor. The plugin starts the server and stops it when Neovim exits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from server_client import ROOT, server_command

from ds4spec.backend.prompt import ChatMessage
from ds4spec.core.events import TextChunk
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.faces.shared.stopping import decide

SOURCE = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"
ROW, COL = 3, 0  # the empty line: 1-based row, 0-based byte column, as Neovim counts
MAX_TOKENS = 28  # the completion spans three lines: ghost text below the cursor's line, too
QUESTION = "Explain this code."


def engine_texts(model: Path, prefix: str, suffix: str, chat: str, stop_at: str | None = None) -> tuple[str, str]:
    """What the engine itself writes between ``prefix`` and ``suffix`` (cut as ``stop_at`` says), and its reply
    to the chat message ``chat``."""
    with Engine.load(Settings(target=str(model), draft="none", threads=1)) as engine:
        middle = "".join(e.text for e in engine.complete(prefix, suffix, max_tokens=MAX_TOKENS)
                         if isinstance(e, TextChunk))
        reply = "".join(e.text for e in engine.chat([ChatMessage("user", chat)], max_tokens=MAX_TOKENS)
                        if isinstance(e, TextChunk))
    return middle[:decide(middle, stop_at, prefix[prefix.rfind("\n") + 1:])[0]], reply


def split_at(text: str, row: int, col: int) -> tuple[str, str]:
    lines = text.split("\n")
    offset = sum(len(line) + 1 for line in lines[: row - 1]) + col
    return text[:offset], text[offset:]


@pytest.mark.skipif(shutil.which("nvim") is None, reason="nvim is not installed (scripts/setup.sh test installs "
                    "the Debian package neovim where apt-get is available)")
def test_neovim_plugin_completes_at_the_cursor_and_chats(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    source = tmp_path / "add.py"
    source.write_text(SOURCE)
    prefix, suffix = split_at(SOURCE, ROW, COL)
    chat_content = QUESTION + "\n\n" + "\n".join(SOURCE.split("\n")[:2]) + "\n"
    middle, reply = engine_texts(tiny_bpe_gguf, prefix, suffix, chat_content)
    assert "\n" in middle, "pick a text whose completion spans lines, to check multi-line ghost text and insertion"
    assert "\x00" not in middle + reply, "pick a text whose completion has no NUL (Vim stores it as NL)"
    chat_out, pid_out = tmp_path / "chat.txt", tmp_path / "server.pid"
    env = {**os.environ, "DS4SPEC_REPO": str(ROOT), "DS4SPEC_SERVER": json.dumps(server_command(tiny_bpe_gguf)),
           "DS4SPEC_FILE": str(source), "DS4SPEC_ROW": str(ROW), "DS4SPEC_COL": str(COL),
           "DS4SPEC_MAX_TOKENS": str(MAX_TOKENS), "DS4SPEC_QUESTION": QUESTION, "DS4SPEC_CHAT_OUT": str(chat_out),
           "DS4SPEC_PID_OUT": str(pid_out)}
    proc = subprocess.run(["nvim", "--headless", "-u", "NONE", "-i", "NONE", "-n",
                           "-c", f"luafile {ROOT / 'tests' / 'editors' / 'nvim_session.lua'}"],
                          cwd=tmp_path, env=env, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace") + proc.stdout.decode(errors="replace")
    assert source.read_text() == prefix + middle + suffix
    assert chat_out.read_text() == reply
    pid = int(pid_out.read_text())
    assert not Path(f"/proc/{pid}").exists(), "the server outlived Neovim"


def vim_has_channels() -> bool:
    if shutil.which("vim") is None:
        return False
    version = subprocess.run(["vim", "--version"], capture_output=True, text=True, timeout=30).stdout
    return "+job" in version and "+channel" in version and "Vi IMproved 9." in version


@pytest.mark.skipif(not vim_has_channels(), reason="needs Vim 9 with +job and +channel")
def test_vim_script_inserts_a_completion_at_the_cursor(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    source = tmp_path / "add.py"
    source.write_text(SOURCE)
    prefix, suffix = split_at(SOURCE, ROW, COL)
    middle, _ = engine_texts(tiny_bpe_gguf, prefix, suffix, "unused")
    error_out = tmp_path / "error.txt"
    env = {**os.environ, "DS4SPEC_REPO": str(ROOT), "DS4SPEC_SERVER": json.dumps(server_command(tiny_bpe_gguf)),
           "DS4SPEC_FILE": str(source), "DS4SPEC_ROW": str(ROW), "DS4SPEC_COL": str(COL),
           "DS4SPEC_MAX_TOKENS": str(MAX_TOKENS), "DS4SPEC_ERROR_OUT": str(error_out),
           "DS4SPEC_PID_OUT": str(tmp_path / "server.pid")}
    proc = subprocess.run(["vim", "-Nu", "NONE", "-i", "NONE", "-n", "-es",
                           "-S", str(ROOT / "tests" / "editors" / "vim_session.vim")],
                          cwd=tmp_path, env=env, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    reason = error_out.read_text() if error_out.exists() else proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, reason
    assert source.read_text() == prefix + middle + suffix
    pid = int((tmp_path / "server.pid").read_text())
    assert not Path(f"/proc/{pid}").exists(), "the server outlived Vim"


@pytest.mark.skipif(shutil.which("emacs") is None,
                    reason="emacs is not installed (optional: the client in docs/editors.md)")
def test_emacs_client_inserts_a_completion_at_point(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    prefix, suffix = split_at(SOURCE, ROW, COL)
    middle, _ = engine_texts(tiny_bpe_gguf, prefix, suffix, "unused", stop_at="block")
    script = tmp_path / "session.el"
    command = " ".join(json.dumps(a) for a in server_command(tiny_bpe_gguf, "--max-tokens", str(MAX_TOKENS)))
    script.write_text(f"""
(load {json.dumps(str(ROOT / 'editors' / 'emacs' / 'ds4spec.el'))})
(setq ds4spec-command '({command}))
(with-temp-buffer
  (insert {json.dumps(SOURCE)})
  (goto-char {len(prefix) + 1})
  (ds4spec-complete)
  (let ((n 0))
    (while (and (= (buffer-size) {len(SOURCE)}) (< n 1200))
      (accept-process-output nil 0.05)
      (setq n (1+ n))))
  (write-region (point-min) (point-max) {json.dumps(str(tmp_path / 'out.py'))}))
(ds4spec-stop)
(when (process-live-p ds4spec--process) (kill-emacs 4))
""")
    proc = subprocess.run(["emacs", "--batch", "-Q", "-l", str(script)], cwd=tmp_path, capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert (tmp_path / "out.py").read_text() == prefix + middle + suffix
