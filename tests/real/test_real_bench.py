"""`ds4spec bench` on the default pair: its "identical" column measures speculation, nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

NEVER = "1000000"  # a warm-up no prompt and answer reach: the mode runs the speculative loop but never drafts


def test_a_mode_that_never_drafts_is_identical_to_plain_on_prose(tmp_path: Path) -> None:
    """`pair` with a warm-up it never reaches decodes one token a pass, as plain does, on any machine (whatever
    the cost check says of SmolLM2 there), and each of its runs follows plain's run on the same target. A run
    that reused the context plain left behind read the prompt's last token alone rather than in its batch, and
    flipped near-ties: in bench run 4 it matched plain on 2 of 5 prose answers."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "bench", "--workload", "prose", "--limit", "5",
                           "--max-tokens", "128", "--mode", "pair", "--warmup", NEVER, "--out", str(out)],
                          capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    runs = [r for r in json.loads(out.read_text())["runs"] if r["mode"] == "pair"]
    assert len(runs) == 5
    assert all(r["drafted_tokens"] == 0 for r in runs), [(r["task_id"], r["drafted_tokens"]) for r in runs]
    assert all(r["identical_to_plain"] for r in runs), [(r["task_id"], r["identical_to_plain"]) for r in runs]
