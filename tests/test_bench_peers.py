"""`ds4spec bench --peers --plot` on tiny models: every system gets a row, charts are real PNGs, a peer that
cannot run is a row with its reason, and llama.cpp's own plain decoding ends exactly where ds4spec's does.

The tiny models have random weights, so the numbers (speed, acceptance) mean nothing here; what is checked
is the plumbing, the output rule shared by all systems, and that no peer failure can crash the bench.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.bench.peer_runs import PeerSitting, run_peer_groups
from ds4spec.bench.peers import PEER_KEYS, BenchTask, PeerSetup, parse_peers
from ds4spec.bench.peers.base import PeerResult
from ds4spec.bench.peers.llama_lookup import _score
from ds4spec.bench.peers.llama_plain import LlamaPlainPeer
from ds4spec.bench.systems import system_rows
from ds4spec.bench.workloads import load_tasks
from ds4spec.core.events import Finished
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.errors import UsageError

CHARTS = ("tokens_per_second.png", "acceptance_by_event.png", "accepted_length.png", "time_split.png")


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ds4spec", "bench", "--limit", "1", "--max-tokens", "12", *args],
                          capture_output=True, timeout=300, env=dict(os.environ), text=True)


def rows_by_system(report: dict) -> dict[tuple[str, str], dict]:
    return {(r["workload"], r["system"]): r for r in report["systems"]}


def test_all_peers_run_and_every_system_has_a_row_and_charts_are_png(tiny_models: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    target, drafter = str(tiny_models["bpe"]), str(tiny_models["spm"])
    out, plots = tmp_path / "bench.json", tmp_path / "plots"
    proc = bench("--target", target, "--draft", drafter, "--mode", drafter, "--mode", "lookup",
                 "--workload", "humaneval", "--workload", "edits", "--peers", "llama,lookup,hf", "--plot", str(plots),
                 "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    rows = rows_by_system(report)
    systems = {"ds4spec plain", f"ds4spec {drafter}", "ds4spec lookup", "llama.cpp plain",
               "llama.cpp prompt-lookup", "transformers plain", "transformers assisted"}
    assert set(rows) == {(w, s) for w in ("humaneval", "edits") for s in systems}
    for row in rows.values():
        assert row["status"] == "ok", row
        assert row["runs"] == 1 and row["tokens_per_second"] > 0, row
    for workload in ("humaneval", "edits"):
        assert rows[(workload, "llama.cpp plain")]["speedup_vs_llama_plain"] == 1.0
        # The same file, greedy, the same output rule: llama.cpp's high-level API writes what ds4spec writes.
        assert rows[(workload, "ds4spec plain")]["matches_llama_plain"] == 1
        assert rows[(workload, "ds4spec plain")]["compared_llama_plain"] == 1
        assistedrow = rows[(workload, "transformers assisted")]
        assert assistedrow["baseline"] == "transformers plain" and assistedrow["compared_own_plain"] == 1
        assert assistedrow["acceptance"] is not None  # counted from transformers' own verify passes
        assert rows[(workload, "llama.cpp prompt-lookup")]["speedup_own"] is not None
    assert "transformers assisted" in proc.stdout and "=llama" in proc.stdout
    # Each peer's runs are in the JSON too, so that a comparison can be worked out again from it.
    peer_runs = {(r["system"], r["workload"], r["task_id"]): r for r in report["peer_runs"]}
    peers = {(system, workload) for workload, system in rows if not system.startswith("ds4spec")}
    assert {(system, workload) for system, workload, _ in peer_runs} == peers
    plain_run = peer_runs[("llama.cpp plain", "humaneval", "HumanEval/0")]
    assert plain_run["timed_tokens"] > 0 and plain_run["seconds"] > 0 and plain_run["drafted"] is None
    # Interleaved: each prompt is run by ds4spec and then by every peer before the next prompt starts.
    assert report["settings"]["peers_interleaved"] is True
    assert progress(proc.stderr) == ["ds4spec humaneval", "peers humaneval", "ds4spec edits", "peers edits"]
    for name in CHARTS:
        with Image.open(plots / name) as image:
            assert image.format == "PNG" and image.size[0] > 300 and image.size[1] > 200
            image.verify()


def progress(stderr: str) -> list[str]:
    """The bench's progress lines, in order: who finished which workload's prompt."""
    lines = [line.split() for line in stderr.splitlines() if line.startswith("ds4spec: bench ")]
    return [f"{'peers' if words[2] == 'peers' else 'ds4spec'} {words[-3]}" for words in lines]


def test_peers_apart_run_after_every_ds4spec_run_with_the_same_rows(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = bench("--target", str(tiny_bpe_gguf), "--mode", "lookup", "--limit", "2", "--workload", "humaneval",
                 "--peers", "llama", "--peers-apart", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["settings"]["peers_interleaved"] is False
    assert progress(proc.stderr) == ["ds4spec humaneval"] * 2 + ["peers humaneval"] * 2
    rows = rows_by_system(report)
    assert rows[("humaneval", "llama.cpp plain")]["runs"] == 2
    assert rows[("humaneval", "ds4spec plain")]["matches_llama_plain"] == 2


def test_every_other_prompt_runs_the_peers_first_and_in_reverse_as_ds4spec_s_modes_are(tiny_bpe_gguf: Path,
                                                                                          tmp_path: Path) -> None:
    """No system always runs right after another: the in-process llama.cpp plain run, always after ds4spec's modes,
    read 9 to 11% faster than ds4spec plain on the f32 pair's code where the two were level run against each other."""
    out = tmp_path / "bench.json"
    proc = bench("--target", str(tiny_bpe_gguf), "--mode", "lookup", "--limit", "3", "--workload", "humaneval",
                 "--peers", "llama,lookup", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert progress(proc.stderr) == ["ds4spec humaneval", "peers humaneval", "peers humaneval", "ds4spec humaneval",
                                     "ds4spec humaneval", "peers humaneval"]
    rows = rows_by_system(json.loads(out.read_text()))
    assert rows[("humaneval", "ds4spec plain")]["matches_llama_plain"] == 3  # each run still compared with its own


class Recorded(LlamaPlainPeer):
    """llama.cpp plain under a name of its own, noting when it ran."""

    def __init__(self, name: str, setup: PeerSetup, log: list[str]) -> None:
        super().__init__(setup)
        self.name, self._log_to = name, log

    def run(self, task: BenchTask, max_tokens: int) -> PeerResult:
        self._log_to.append(f"{self.name} {task.task_id}")
        return super().run(task, max_tokens)


def test_a_sitting_runs_its_peers_in_reverse_when_asked(tiny_bpe_gguf: Path) -> None:
    ran: list[str] = []
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=64)) as target:
        vocab = target.tokenizer
        setup = PeerSetup(tiny_bpe_gguf, vocab, 64, 64, None, 0, None)
        prompt = tuple(vocab.tokenize(b"def add(a, b):\n"))
        sitting = PeerSitting(4, log=lambda line: None)
        sitting.start([Recorded("first", setup, ran), Recorded("second", setup, ran)], None)
        try:
            sitting.run(BenchTask("humaneval", "A", prompt, ()))
            sitting.run(BenchTask("humaneval", "B", prompt, ()), reverse=True)
        finally:
            sitting.close()
    assert ran == ["first A", "second A", "second B", "first B"]
    assert all(len(record.results) == 2 for record in sitting.records)


def test_a_peer_that_cannot_run_is_a_row_with_its_reason(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    """No --draft, and the pair's drafter is not downloaded (a fresh DS4SPEC_HOME): transformers' assisted
    generation has no assistant. It says so in its row; the other peers run."""
    out = tmp_path / "bench.json"
    proc = bench("--target", str(tiny_bpe_gguf), "--mode", "lookup", "--workload", "humaneval", "--peers", "hf",
                 "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = rows_by_system(json.loads(out.read_text()))
    assisted = rows[("humaneval", "transformers assisted")]
    assert assisted["status"] == "unavailable" and assisted["runs"] == 0
    assert "smollm2-135m" in assisted["reason"] and "not downloaded" in assisted["reason"]
    assert assisted["tokens_per_second"] is None
    assert rows[("humaneval", "transformers plain")]["status"] == "ok"
    assert rows[("humaneval", "llama.cpp plain")]["status"] == "ok"  # the baseline always runs
    assert ("humaneval", "llama.cpp prompt-lookup") not in rows  # not asked for
    assert "unavailable: no drafter" in proc.stdout


def test_failures_inside_a_peer_become_its_row(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    """A model file llama.cpp cannot load, and a prompt longer than the context: real failures, recorded."""
    garbage = tmp_path / "not-a-model.gguf"
    garbage.write_bytes(b"GGUF" + bytes(64))
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=64)) as target:
        vocab = target.tokenizer
        short = tuple(vocab.tokenize(b"def add(a, b):\n"))
        tasks = [BenchTask("humaneval", "short", short, ()), BenchTask("humaneval", "long", short * 20, ())]
        broken = LlamaPlainPeer(PeerSetup(garbage, vocab, 64, 64, None, 0, None))
        tight = LlamaPlainPeer(PeerSetup(tiny_bpe_gguf, vocab, 64, 64, None, 0, None))
        broken.name = "broken"  # two peers of one class in one table need two names
        records = run_peer_groups([[broken], [tight]], tasks, 8, log=lambda line: None)
    assert records[0].status == "failed" and records[0].reason.startswith("load: ") and not records[0].results
    assert records[1].status == "failed" and list(records[1].results) == [("humaneval", "short")]
    assert records[1].reason.startswith("1 of 2 runs failed; first: long: ")
    rows = {r["system"]: r for r in system_rows(records, ["humaneval"])}
    assert rows["broken"]["status"] == "failed" and rows["broken"]["tokens_per_second"] is None
    assert rows["llama.cpp plain"]["runs"] == 1 and "runs failed" in rows["llama.cpp plain"]["reason"]


def test_llama_plain_peer_stops_exactly_where_ds4spec_plain_does(tiny_bpe_gguf: Path) -> None:
    """Same tokens for budgets and for stop strings that cut mid-output (taken from the output itself)."""
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=2048, n_gpu_layers=0)) as target:
        peer = LlamaPlainPeer(PeerSetup(tiny_bpe_gguf, target.tokenizer, 2048, 512, None, 0, None))
        peer.load()
        try:
            for task in load_tasks("humaneval", 3):
                prompt = task.prompt_tokens(target)
                free = _plain(target, prompt, 40, ())
                text = target.tokenizer.detokenize(free.tokens).decode("utf-8", "replace")
                stop = text[len(text) // 2: len(text) // 2 + 3]
                for budget, stops in ((40, ()), (7, ()), (40, (stop,)), (40, task.stop)):
                    ours = _plain(target, prompt, budget, stops)
                    theirs = peer.run(BenchTask("humaneval", task.task_id, tuple(prompt), stops), budget)
                    assert theirs.tokens == ours.tokens, (task.task_id, budget, stops)
                    assert theirs.finish == ours.reason.value
                    assert theirs.timed_tokens == len(theirs.tokens) and theirs.seconds > 0
        finally:
            peer.close()


def test_llama_plain_peer_reads_every_prompt_whole(tiny_bpe_gguf: Path) -> None:
    """As ds4spec's target and llama-server do: a prefix kept from the last prompt would be read in other batches."""
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=2048, n_gpu_layers=0)) as target:
        peer = LlamaPlainPeer(PeerSetup(tiny_bpe_gguf, target.tokenizer, 2048, 512, None, 0, None))
        peer.load()
        try:
            first = target.tokenizer.tokenize(b"def shared_prefix(a, b):\n    return a + b\n\n")
            second = [*first, *target.tokenizer.tokenize(b"def other(x):\n")]
            fed: list[int] = []
            llama = peer._llama
            evaluate = llama.eval

            def counting(tokens: list[int]) -> None:
                fed.append(len(tokens))
                evaluate(tokens)

            llama.eval = counting
            peer.run(BenchTask("humaneval", "a", tuple(first), ()), 4)
            fed.clear()
            peer.run(BenchTask("humaneval", "b", tuple(second), ()), 4)
            assert fed[0] == len(second)
        finally:
            peer.close()


def _plain(target: LlamaTarget, prompt: list[int], budget: int, stop: tuple[str, ...]) -> Finished:
    finished = list(generate_plain(target, GenerationRequest(prompt, budget, stop=stop)))[-1]
    assert isinstance(finished, Finished)
    return finished


def test_peer_selection() -> None:
    assert parse_peers("all") == PEER_KEYS
    assert parse_peers("lookup") == ("llama", "lookup")  # the baseline comes along
    assert parse_peers(" HF , llama ") == ("llama", "hf")
    assert parse_peers("none") == ()
    for bad in ("", "vllm", "llama,,x"):
        with pytest.raises(UsageError, match="--peers"):
            parse_peers(bad)


def test_a_bad_peer_list_fails_before_any_model_loads(tiny_bpe_gguf: Path) -> None:
    proc = bench("--target", str(tiny_bpe_gguf), "--peers", "llama,vllm")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().startswith("ds4spec: error: --peers takes all, none or a list of llama")


def test_lookup_acceptance_is_scored_against_what_was_generated() -> None:
    sequence = [1, 2, 3, 4, 5, 6, 7]
    proposals = [(3, [4, 5, 9]), (5, [6, 7, 8, 8]), (2, []), (7, [1, 2])]
    # 2 of 3 accepted; [6, 7] of [6, 7, 8, 8] checked against the 2 generated tokens; empty and
    # past-the-end drafts are no verify pass with a draft.
    assert _score(sequence, proposals) == (5, 4, 2)
