"""llama.cpp's own server as a bench peer, for real: built once from the llama.cpp that the installed
llama-cpp-python vendors (or reused from the cache), started in every default mode on a tiny model, one request
each, read back as rows of `ds4spec bench --peers llama-server`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ds4spec.bench.peer_runs import run_peer_groups
from ds4spec.bench.peers import BenchTask, PeerSetup
from ds4spec.bench.peers.base import TargetVocab
from ds4spec.bench.peers.llama_server import server_peers
from ds4spec.bench.systems import system_rows

MODES = ("plain", "plain, read", "ngram-simple", "ngram-mod", "ngram-map-k", "draft-simple")


@pytest.mark.timeout(2400)  # a cold build of llama-server on 2 cores, then the runs
def test_every_default_mode_answers_one_request_per_workload(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    """The same file, greedy, through the server's raw completion and its chat endpoint (the model's own template):
    the prompt has ds4spec's token count on both, and plain output is ds4spec plain's token for token, the weights
    mapped or read into memory as ds4spec's are (``--no-mmap``). draft-simple
    gets the target itself as its same-vocabulary drafter, so everything it drafts is accepted."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "bench", "--target", str(tiny_bpe_gguf), "--mode",
                           "lookup", "--workload", "humaneval", "--workload", "edits", "--limit", "1",
                           "--max-tokens", "16", "--peers", "llama-server", "--peer-draft", str(tiny_bpe_gguf),
                           "--no-mmap",
                           "--out", str(out)], capture_output=True, text=True, timeout=1800, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    rows = {(r["workload"], r["system"]): r for r in json.loads(out.read_text())["systems"]}
    for workload in ("humaneval", "edits"):
        for mode in MODES:
            row = rows[(workload, f"llama-server {mode}")]
            assert row["status"] == "ok" and row["runs"] == 1, row
            assert row["tokens_per_second"] > 0 and row["speedup_vs_ds4spec_plain"] is not None, row
            assert row["baseline"] == "llama-server plain"
        for plain in (rows[(workload, "llama-server plain")], rows[(workload, "llama-server plain, read")]):
            assert plain["matches_ds4spec_plain"] == 1 and plain["drafted"] is None
        drafting = rows[(workload, "llama-server draft-simple")]
        assert drafting["drafted"] > 0 and drafting["acceptance"] == 1.0, drafting
        assert drafting["matches_own_plain"] == 1
    assert "llama-server draft-simple" in proc.stdout


def test_a_server_that_cannot_load_its_model_is_a_row_with_the_servers_own_words(tiny_bpe_gguf: Path,
                                                                                 tmp_path: Path) -> None:
    garbage = tmp_path / "not-a-model.gguf"
    garbage.write_bytes(b"GGUF" + bytes(64))
    with TargetVocab(tiny_bpe_gguf) as vocab:
        setup = PeerSetup(garbage, vocab.tokenizer, 256, 64, 1, 0, None)
        prompt = tuple(vocab.tokenizer.tokenize(b"def f():\n"))
        records = run_peer_groups([server_peers(setup, (), print)],
                                  [BenchTask("humaneval", "f", prompt, (), text="def f():\n")], 4, log=print)
    row = system_rows(records, ["humaneval"])[0]
    assert row["status"] == "failed" and row["runs"] == 0
    assert row["reason"].startswith("load: ServerPeerError: llama-server exited with status"), row["reason"]
