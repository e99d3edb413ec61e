"""Ctrl-C while the REPL loads the real target ends it at once with exit code 130 and one line: before, the
interrupt landed in llama.cpp's log callback, Python printed a traceback for it and dropped it, and the REPL
started once the load was done."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pexpect

ANSI = re.compile(r"\x1b\[[0-9;?<]*[A-Za-z]")


def test_ctrl_c_while_the_repl_loads_the_target_ends_it(default_pair_paths: dict[str, Path], tmp_path: Path) -> None:
    env = {**os.environ, "DS4SPEC_HOME": str(tmp_path / "home"), "TERM": "xterm-256color",
           "PROMPT_TOOLKIT_NO_CPR": "1", "DS4SPEC_LLAMA_LOG": "1"}  # llama.cpp's log says when tensors load
    repl = pexpect.spawn(sys.executable, ["-m", "ds4spec", "repl", "--target", str(default_pair_paths["target"]),
                                          "--draft", "none"], env=env, timeout=120, dimensions=(30, 120))
    try:
        repl.expect_exact("load_tensors")
        repl.sendintr()
        start = time.monotonic()
        repl.expect(pexpect.EOF, timeout=60)
        assert time.monotonic() - start < 10
        repl.close()
        out = ANSI.sub("", repl.before.decode("utf-8", "replace"))
        assert repl.exitstatus == 130, out[-2000:]
        assert "ds4spec: interrupted" in out
        assert "Exception ignored" not in out and "Traceback" not in out and "you>" not in out
    finally:
        repl.terminate(force=True)
