"""The order of `ds4spec bench`'s runs: each mode runs first on its prompt as often as any other, and last too.

Of two runs of one prompt the second was measured 2.7% faster, and the bench once ran plain first on every
prompt, so every speedup carried that bias. Then the order was reversed every other prompt, which left a third
mode in the middle of every prompt's runs; now it also turns by one mode every two prompts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``ds4spec bench ARGS --workload humaneval --max-tokens 12``, which must succeed, and its JSON report."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "bench", *args, "--workload", "humaneval",
                           "--max-tokens", "12", "--out", str(out)],
                          capture_output=True, timeout=300, env=dict(os.environ), text=True)
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads(out.read_text())


def test_three_modes_run_in_all_six_orders_over_six_prompts(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    target, drafter = str(tiny_models["bpe"]), str(tiny_models["spm"])
    runs = bench(tmp_path, "--target", target, "--draft", drafter, "--mode", drafter, "--mode", "lookup",
                 "--limit", "6")[1]["runs"]
    tasks = list(dict.fromkeys(r["task_id"] for r in runs))
    assert len(tasks) == 6
    order = [[r["mode"] for r in runs if r["task_id"] == task] for task in tasks]
    # Reversed every other prompt, turned by one mode every two.
    assert order == [["plain", drafter, "lookup"], ["lookup", drafter, "plain"],
                     [drafter, "lookup", "plain"], ["plain", "lookup", drafter],
                     ["lookup", "plain", drafter], [drafter, "plain", "lookup"]]
    for mode in ("plain", drafter, "lookup"):
        assert [o[0] for o in order].count(mode) == 2 and [o[-1] for o in order].count(mode) == 2
    # Plain's answer is known only after the last run of a reversed prompt, and every run is still compared with it.
    assert all(r["identical_to_plain"] for r in runs), [(r["task_id"], r["mode"]) for r in runs]
    assert all(r["committed_tokens"] > 0 for r in runs)


def test_each_prompt_runs_as_often_as_asked_with_the_order_reversed_from_run_to_run(
        tiny_models: dict[str, Path], tmp_path: Path) -> None:
    """`--repeat 2`: every run of a prompt is one more sample of every mode; the rows are over all of them."""
    target = str(tiny_models["bpe"])
    proc, report = bench(tmp_path, "--target", target, "--mode", "lookup", "--limit", "2", "--repeat", "2")
    runs = report["runs"]
    labels = list(dict.fromkeys(r["task_id"] for r in runs))
    assert labels == ["HumanEval/0", "HumanEval/0 #2", "HumanEval/1", "HumanEval/1 #2"]
    order = [[r["mode"] for r in runs if r["task_id"] == label] for label in labels]
    assert order == [["plain", "lookup"], ["lookup", "plain"], ["lookup", "plain"], ["plain", "lookup"]]
    # A prompt's runs give the same greedy answer, and each is compared with the plain run beside it.
    for label in labels[1::2]:
        first, again = ([r for r in runs if r["task_id"] == name and r["mode"] == "plain"]
                        for name in (label.split(" #")[0], label))
        assert first[0]["committed_tokens"] == again[0]["committed_tokens"]
    assert all(r["identical_to_plain"] for r in runs)
    rows = {r["mode"]: r for r in report["rows"]}
    assert rows["lookup"]["runs"] == 4 and rows["lookup"]["identical"] == 4
    assert rows["plain"]["tokens"] == sum(r["committed_tokens"] for r in runs if r["mode"] == "plain")
    assert report["settings"]["repeat"] == 2
    low, high = rows["lookup"]["speedup_interval"]  # four answers: a bootstrap over them
    assert low <= rows["lookup"]["speedup"] <= high and rows["plain"].get("speedup_interval") is None
    assert "each run 2 times" in proc.stdout


def test_a_repeat_below_one_is_refused_before_any_model_loads(tiny_models: dict[str, Path]) -> None:
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "bench", "--target", str(tiny_models["bpe"]),
                           "--repeat", "0"], capture_output=True, timeout=120, env=dict(os.environ), text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["ds4spec: error: --repeat must be at least 1, got 0"]


def test_the_control_runs_plain_again_as_a_mode_interleaved_with_the_others(
        tiny_models: dict[str, Path], tmp_path: Path) -> None:
    """`--mode control`: plain decoding run again as a mode, in the modes' turns, reported as they are: how far two runs
    of the same thing differ in this run, beside the modes it is compared with."""
    target = str(tiny_models["bpe"])
    proc, report = bench(tmp_path, "--target", target, "--mode", "lookup", "--mode", "control", "--limit", "2")
    runs = report["runs"]
    order = [[r["mode"] for r in runs if r["task_id"] == task] for task in ("HumanEval/0", "HumanEval/1")]
    assert order == [["plain", "control", "lookup"], ["lookup", "control", "plain"]]
    control = [r for r in runs if r["mode"] == "control"]
    plain = [r for r in runs if r["mode"] == "plain"]
    # Plain decoding, not a speculative loop that happened to draft nothing: no cycle, no loop time, no drafter.
    assert all(r["identical_to_plain"] and r["drafted_tokens"] == 0 and r["loop_seconds"] == 0 for r in control)
    assert [r["target_forward_passes"] for r in control] == [r["target_forward_passes"] for r in plain]
    rows = {r["mode"]: r for r in report["rows"]}
    assert list(rows) == ["plain", "control", "lookup"]
    low, high = rows["control"]["speedup_interval"]
    assert low <= rows["control"]["speedup"] <= high
    assert "control" not in report["settings"]["drafters"] and "control" in report["settings"]["modes"]
    assert any(line.split()[1:2] == ["control"] for line in proc.stdout.splitlines()), proc.stdout
