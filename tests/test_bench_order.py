"""The order of `ds4spec bench`'s runs: no mode always runs first on its prompt.

Of two runs of one prompt the second was measured 2.7% faster, and the bench once ran plain first on every
prompt, so every speedup carried that bias. Now the order is reversed every other prompt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_every_other_prompt_runs_its_modes_in_reverse_order(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    target, drafter = str(tiny_models["bpe"]), str(tiny_models["spm"])
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "bench", "--target", target, "--draft", drafter,
                           "--mode", drafter, "--mode", "lookup", "--workload", "humaneval", "--limit", "3",
                           "--max-tokens", "12", "--out", str(out)],
                          capture_output=True, timeout=300, env=dict(os.environ), text=True)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(out.read_text())["runs"]
    tasks = list(dict.fromkeys(r["task_id"] for r in runs))
    assert len(tasks) == 3
    order = [[r["mode"] for r in runs if r["task_id"] == task] for task in tasks]
    assert order == [["plain", drafter, "lookup"], ["lookup", drafter, "plain"], ["plain", drafter, "lookup"]]
    # Plain's answer is known only after the last run of a reversed prompt, and every run is still compared with it.
    assert all(r["identical_to_plain"] for r in runs), [(r["task_id"], r["mode"]) for r in runs]
    assert all(r["committed_tokens"] > 0 for r in runs)
