"""llama.cpp's own server as a bench peer, without building it: every way it can fail to exist or to start is a
row of the bench's table with its reason, never a crash. The real tier (tests/real/test_real_llama_server.py)
builds the server and runs every mode."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ds4spec.bench.peer_runs import run_peer_groups
from ds4spec.bench.peers import BenchTask, PeerSetup, build_peer_groups, parse_peers
from ds4spec.bench.peers.base import TargetVocab
from ds4spec.bench.peers.llama_server import LlamaServerPeer, SharedServerBuild, credited_tokens, server_peers
from ds4spec.bench.peers.server_build import BINARY, BUILD_RECORD, ServerBuild, ServerUnavailable, installed_build
from ds4spec.bench.systems import system_rows
from ds4spec.errors import UsageError

TYPES = ("ngram-simple", "draft-simple")


@pytest.fixture
def vocab(tiny_bpe_gguf: Path) -> Iterator[TargetVocab]:
    with TargetVocab(tiny_bpe_gguf) as v:
        yield v


def setup_for(target: Path, vocab: TargetVocab, drafter: Path | None = None, mmap: bool = True) -> PeerSetup:
    return PeerSetup(target, vocab.tokenizer, 256, 64, 1, 0, None, None, drafter,
                     None if drafter else "no drafter with the target's vocabulary is pulled", mmap)


def tasks(vocab: TargetVocab) -> list[BenchTask]:
    prompt = tuple(vocab.tokenizer.tokenize(b"def add(a, b):\n"))
    return [BenchTask("humaneval", "add", prompt, (), text="def add(a, b):\n")]


def build_in(cache: Path, sdist: Path | None = None) -> ServerBuild:
    return ServerBuild("0.3.36", "test", ("-DGGML_NATIVE=OFF",), cache, sdist)


def rows(records: list, workload: str = "humaneval") -> dict[str, dict]:
    return {r["system"]: r for r in system_rows(records, [workload])}


def test_without_a_compiler_every_server_mode_is_a_row_saying_so(tiny_bpe_gguf: Path, vocab: TargetVocab,
                                                                 tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv("CXX", raising=False)
    build = build_in(tmp_path / "cache")
    peers = server_peers(setup_for(tiny_bpe_gguf, vocab, tiny_bpe_gguf), TYPES, print, build)
    records = run_peer_groups([peers], tasks(vocab), 8, log=lambda line: None)
    table = rows(records)
    assert set(table) == {"llama-server plain", "llama-server ngram-simple", "llama-server draft-simple"}
    for row in table.values():
        assert row["status"] == "unavailable" and row["runs"] == 0, row
        assert row["reason"] == "building llama-server needs cmake, which is not on PATH"
    assert not build.folder.exists()  # nothing was attempted


def test_a_failed_build_is_one_reason_for_every_mode_and_is_not_retried(tiny_bpe_gguf: Path, vocab: TargetVocab,
                                                                       tmp_path: Path) -> None:
    """A real CMake run on an sdist whose llama.cpp cannot configure: the first mode's load fails with CMake's own
    error, the other modes are unavailable for that reason, and the cache holds no server afterwards."""
    source = tmp_path / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"
    source.mkdir(parents=True)
    (source / "CMakeLists.txt").write_text('cmake_minimum_required(VERSION 3.14)\nproject(broken NONE)\n'
                                           'message(FATAL_ERROR "this llama.cpp does not configure")\n')
    sdist = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(tmp_path / "llama_cpp_python-0.3.36", arcname="llama_cpp_python-0.3.36")
    build = build_in(tmp_path / "cache", sdist)
    notes: list[str] = []
    peers = server_peers(setup_for(tiny_bpe_gguf, vocab, tiny_bpe_gguf), TYPES, notes.append, build)
    table = rows(run_peer_groups([peers], tasks(vocab), 8, log=lambda line: None))
    plain = table["llama-server plain"]
    assert plain["status"] == "failed" and plain["runs"] == 0
    assert "building llama-server failed" in plain["reason"] and "this llama.cpp does not configure" in plain["reason"]
    for name in ("llama-server ngram-simple", "llama-server draft-simple"):
        assert table[name]["status"] == "unavailable"
        assert table[name]["reason"].startswith("building llama-server failed"), table[name]
    assert not build.binary.exists() and "does not configure" in build.log.read_text()
    assert len([n for n in notes if "building llama-server" in n]) == 1  # one attempt, announced


def test_a_server_that_does_not_start_is_a_row_with_its_reason(tiny_bpe_gguf: Path, vocab: TargetVocab,
                                                              tmp_path: Path) -> None:
    """A cached server file that cannot run (a build cut short): the operating system's own error is the reason."""
    build = build_in(tmp_path / "cache")
    build.folder.mkdir(parents=True)
    build.binary.write_bytes(b"\x7fELF cut short")
    build.binary.chmod(0o755)
    peers = server_peers(setup_for(tiny_bpe_gguf, vocab), (), print, build)
    plain = rows(run_peer_groups([peers], tasks(vocab), 8, log=lambda line: None))["llama-server plain"]
    assert plain["status"] == "failed" and plain["runs"] == 0
    assert plain["reason"].startswith("load: OSError: [Errno 8] Exec format error"), plain["reason"]


def test_draft_modes_without_a_same_vocabulary_drafter_say_how_to_get_one(tiny_bpe_gguf: Path,
                                                                          vocab: TargetVocab, tmp_path: Path) -> None:
    build = build_in(tmp_path / "cache")
    peer = LlamaServerPeer(setup_for(tiny_bpe_gguf, vocab), "draft-simple", SharedServerBuild(print, build))
    assert peer.available() == "no drafter with the target's vocabulary is pulled"


def test_the_server_is_started_as_ds4spec_runs_its_target(tiny_bpe_gguf: Path, vocab: TargetVocab,
                                                          tmp_path: Path) -> None:
    """Localhost only, one slot, no prompt cache, the target's context, batch and threads; the drafter for draft
    modes only."""
    build = SharedServerBuild(print, build_in(tmp_path / "cache"))
    drafter = tmp_path / "drafter.gguf"
    draft = LlamaServerPeer(setup_for(tiny_bpe_gguf, vocab, drafter), "draft-simple", build)
    cmd = draft.command(Path("/bin/llama-server"), 8123)

    def value(flag: str) -> str:
        return cmd[cmd.index(flag) + 1]

    assert value("--host") == "127.0.0.1" and value("--port") == "8123" and value("--model") == str(tiny_bpe_gguf)
    assert [value(f) for f in ("--ctx-size", "--batch-size", "--threads", "--parallel")] == ["256", "64", "1", "1"]
    assert {"--no-cache-prompt", "--jinja", "--no-webui"} <= set(cmd)
    assert value("--spec-type") == "draft-simple" and value("--spec-draft-model") == str(drafter)
    ngram = LlamaServerPeer(setup_for(tiny_bpe_gguf, vocab, drafter), "ngram-mod", build).command(Path("s"), 1)
    assert "--spec-draft-model" not in ngram and ngram[ngram.index("--spec-type") + 1] == "ngram-mod"


def test_missing_build_record_names_the_fix(tmp_path: Path) -> None:
    """Without setup.sh's record of the flags, a server built now could run other kernels than ds4spec's."""
    with pytest.raises(ServerUnavailable, match=r"install with scripts/setup\.sh"):
        installed_build(tmp_path / "cache", prefix=tmp_path)
    (tmp_path / BUILD_RECORD).write_text("abc123\n-DGGML_NATIVE=OFF -DGGML_AVX2=ON\n")
    found = installed_build(tmp_path / "cache", prefix=tmp_path)
    assert found.flags == ("-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON")
    assert found.binary == tmp_path / "cache" / "wheels" / "llama-cpp-python-abc123" / BINARY / BINARY


def test_peer_keys_for_llama_server() -> None:
    assert parse_peers("llama-server") == ("llama", "llama-server")
    assert parse_peers("all") == ("llama", "lookup", "hf", "llama-server")
    assert parse_peers("llama-server:ngram-cache,llama-server:ngram-cache") == ("llama", "llama-server:ngram-cache")
    with pytest.raises(UsageError, match="llama-server:TYPE"):
        parse_peers("llama-server:Bad Type")


def test_extra_spec_types_join_the_default_ones(tiny_bpe_gguf: Path, vocab: TargetVocab) -> None:
    setup = setup_for(tiny_bpe_gguf, vocab)
    groups = build_peer_groups(("llama", "llama-server", "llama-server:ngram-cache"), setup, print)
    assert [p.name for p in groups[-1]] == ["llama-server plain", "llama-server ngram-simple", "llama-server ngram-mod",
                                            "llama-server ngram-map-k", "llama-server draft-simple",
                                            "llama-server ngram-cache"]
    only = build_peer_groups(("llama", "llama-server:ngram-cache"), setup, print)
    assert [p.name for p in only[-1]] == ["llama-server plain", "llama-server ngram-cache"]


def test_where_ds4spec_reads_its_weights_a_second_plain_server_reads_them_too(
        tiny_bpe_gguf: Path, vocab: TargetVocab, tmp_path: Path) -> None:
    build = build_in(tmp_path / "cache")
    peers = server_peers(setup_for(tiny_bpe_gguf, vocab, mmap=False), (), print, build)
    assert [p.name for p in peers] == ["llama-server plain", "llama-server plain, read"]
    plain, read = (p.command(Path("s"), 1) for p in peers)
    assert "--load-mode" not in plain and read[read.index("--load-mode") + 1] == "none"
    mapped = server_peers(setup_for(tiny_bpe_gguf, vocab, mmap=True), (), print, build)
    assert [p.name for p in mapped] == ["llama-server plain"]


@pytest.mark.parametrize(("stop_type", "predicted_n", "credited"), [
    ("eos", 85, 84),  # the end-of-generation token is sampled and counted by the server, but is no output
    ("limit", 128, 128),
    ("word", 46, 46),  # the token that completes a stop string is output, as ds4spec commits it
    ("eos", 0, 0),
])
def test_the_server_is_credited_with_its_output_tokens_as_ds4spec_counts_them(stop_type: str, predicted_n: int,
                                                                               credited: int) -> None:
    assert credited_tokens({"stop_type": stop_type}, {"predicted_n": predicted_n}) == credited
