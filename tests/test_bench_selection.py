"""Which prompts `ds4spec bench` runs: ``--limit`` of each workload after its first ``--skip``, so that the goals can
be checked on prompts that tuning never saw; a selection that leaves nothing is a one-line error before any model
loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ds4spec.bench.workloads import load_tasks
from ds4spec.errors import UsageError


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ds4spec", "bench", "--max-tokens", "8", *args],
                          capture_output=True, timeout=300, env=dict(os.environ), text=True)


def test_skip_starts_each_workload_after_its_first_prompts() -> None:
    assert [t.task_id for t in load_tasks("humaneval", 2, skip=5)] == ["HumanEval/5", "HumanEval/6"]
    assert [t.task_id for t in load_tasks("prose", None, skip=20)] == [t.task_id for t in load_tasks("prose")[20:]]
    assert load_tasks("edits", 3, skip=0) == load_tasks("edits", 3)


@pytest.mark.parametrize(("limit", "skip", "message"), [
    (0, 0, "--limit must be at least 1, got 0"),
    (5, -1, "--skip must be 0 or more, got -1"),
    (5, 164, "--skip 164 leaves no humaneval prompt: the workload has 164"),
], ids=["no-prompts", "negative-skip", "skip-past-the-end"])
def test_a_selection_that_leaves_no_prompt_is_refused(limit: int, skip: int, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_tasks("humaneval", limit, skip=skip)


def test_the_bench_runs_the_prompts_after_the_skipped_ones_and_says_so(tiny_models: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = bench("--target", str(tiny_models["bpe"]), "--mode", "lookup", "--workload", "humaneval",
                 "--workload", "prose", "--limit", "2", "--skip", "7", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["settings"]["skip"] == 7
    assert sorted({r["task_id"] for r in report["runs"]}) == sorted(
        t.task_id for w in ("humaneval", "prose") for t in load_tasks(w, 2, skip=7))
    assert "2 prompts per workload after the first 7" in proc.stdout


def test_the_bench_refuses_a_skip_past_the_end_before_loading_a_model(tmp_path: Path) -> None:
    proc = bench("--target", str(tmp_path / "absent.gguf"), "--workload", "prose", "--skip", "24")
    assert proc.returncode != 0
    assert proc.stderr.strip() == "ds4spec: error: --skip 24 leaves no prose prompt: the workload has 24"
