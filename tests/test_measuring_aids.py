"""The measuring aids in ``scripts/`` run: the policies and lookup replayed over a target's own answers, here the tiny
model's. Run 70 found ``lookup_replay.py`` broken (it imported a function the package no longer had)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
FLAT = "1:1,65:1"  # a pass over any number of tokens costs one plain step: a rejected draft loses nothing


def _run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPTS / script), *args], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory, tiny_bpe_gguf: Path) -> Path:
    """The tiny model's greedy answers to the prose prompts, written by the policy replay on its first run."""
    path = tmp_path_factory.mktemp("replay") / "answers.json"
    _run("policy_replay.py", "--answers", str(path), "--target", str(tiny_bpe_gguf), "--workload", "prose",
         "--profile", FLAT)
    return path


@pytest.mark.parametrize("policy", [[], ["--gate"], ["--fresh"]], ids=["triggers", "gate", "fresh"])
def test_where_a_pass_costs_one_step_no_replayed_answer_is_slower_than_plain(
    answers: Path, tiny_bpe_gguf: Path, policy: list[str]
) -> None:
    rows = json.loads(answers.read_text())
    assert rows and {row["workload"] for row in rows} == {"prose"}
    out = _run("policy_replay.py", "--answers", str(answers), "--target", str(tiny_bpe_gguf), "--profile", FLAT,
               *policy)
    lines = [line.split() for line in out.splitlines()]
    per_answer = [line for line in lines if line[1] != "all"]
    assert [line[1] for line in per_answer] == [row["task"] for row in rows]
    assert all(float(line[2].rstrip("x")) >= 1.0 for line in per_answer)
    assert [line[0] for line in lines if line[1] == "all"] == ["prose"]


def test_lookup_s_replay_counts_first_tokens_and_later_ones_apart(answers: Path, tiny_bpe_gguf: Path) -> None:
    out = _run("lookup_replay.py", "--answers", str(answers), "--target", str(tiny_bpe_gguf))
    header, *rows = out.splitlines()
    assert header.split()[-3:] == ["alpha", "first", "later"]
    assert rows and all(row.startswith("prose") for row in rows)
    for row in rows:
        assert all(0.0 <= float(figure) <= 1.0 for figure in row.split()[-3:])


@pytest.mark.parametrize("content", ["not json", '[{"workload": "prose"}]', '[{"workload": "poetry", "task": "x",'
                                     ' "tokens": [1]}]'], ids=["not-json", "no-task", "unknown-workload"])
@pytest.mark.parametrize("script", ["policy_replay.py", "lookup_replay.py"])
def test_an_answers_file_they_did_not_write_is_a_one_line_error(
    tmp_path: Path, tiny_bpe_gguf: Path, script: str, content: str
) -> None:
    path = tmp_path / "answers.json"
    path.write_text(content)
    profile = ["--profile", FLAT] if script == "policy_replay.py" else []
    proc = subprocess.run([sys.executable, str(SCRIPTS / script), "--answers", str(path), "--target",
                           str(tiny_bpe_gguf), *profile], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "is not an answers file written by policy_replay.py" in proc.stderr
    assert path.read_text() == content  # nothing written over it


def test_load_order_times_each_worker_in_the_order_they_loaded(tiny_bpe_gguf: Path) -> None:
    out = _run("load_order.py", "--target", str(tiny_bpe_gguf), "--processes", "3", "--tokens", "4",
               "--rounds", "2", "--ballast", "8")
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["loaded 1", "loaded 2", "loaded 3", "first loaded / later"]
    assert all(len(line.split("rounds")[1].split()) == 2 for line in lines[:3])
    assert float(lines[-1].split(":")[1]) > 0


@pytest.mark.parametrize("args", [["--processes", "1"], ["--tokens", "0"], ["--target", "no-such-model"]],
                         ids=["one-process", "no-tokens", "unknown-target"])
def test_load_order_s_bad_arguments_are_a_one_line_error(tiny_bpe_gguf: Path, args: list[str]) -> None:
    target = [] if "--target" in args else ["--target", str(tiny_bpe_gguf)]
    proc = subprocess.run([sys.executable, str(SCRIPTS / "load_order.py"), *target, *args], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode != 0 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("load_order.py: ")
