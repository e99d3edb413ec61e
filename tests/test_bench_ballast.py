"""`ds4spec bench --ballast MIB`: memory taken before any model loads and given back once every system is loaded,
so that on guests where memory freed by an exited process is slower when taken again, no system loads into it
(the system loaded first decoded 5 to 9% slower there: docs/benchmarks.md, run 72)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ds4spec.bench.ballast import AUTO_BALLAST_MIB, Ballast, auto_ballast_mib


def resident_mib() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads Linux's /proc")
def test_a_ballast_is_memory_really_taken_and_then_given_back() -> None:
    before = resident_mib()
    ballast = Ballast(64)
    assert resident_mib() - before >= 60  # every page written, not merely reserved
    ballast.release()
    assert resident_mib() - before < 8


def test_a_negative_ballast_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 0 MiB"):
        Ballast(-1)


@pytest.mark.parametrize(("meminfo", "expected"), [
    ("MemTotal:       24683520 kB\nMemAvailable:   22000000 kB\n", AUTO_BALLAST_MIB),
    ("MemAvailable:    8388608 kB\n", 2048),  # a quarter of what is available, at most
    ("MemTotal:       24683520 kB\n", 0),  # a kernel that does not say
    ("MemAvailable: lots\n", 0),
    (None, 0),  # no /proc/meminfo: not Linux
], ids=["plenty", "a-quarter", "unsaid", "unreadable", "missing"])
def test_the_default_ballast_with_peers_fits_the_memory_available(tmp_path: Path, meminfo: str | None,
                                                                  expected: int) -> None:
    path = tmp_path / "meminfo"
    if meminfo is not None:
        path.write_text(meminfo)
    assert auto_ballast_mib(path) == expected


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ds4spec", "bench", *args], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))


def test_the_bench_records_the_ballast_it_held(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = bench("--target", str(tiny_bpe_gguf), "--mode", "lookup", "--workload", "humaneval", "--limit", "1",
                 "--max-tokens", "8", "--peers", "llama", "--ballast", "16", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["settings"]["ballast_mib"] == 16
    assert {row["system"] for row in report["systems"]} >= {"ds4spec plain", "llama.cpp plain"}


@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="the default reads Linux's /proc/meminfo")
@pytest.mark.parametrize("peers", [["--peers", "llama"], []], ids=["with-peers", "alone"])
def test_a_bench_with_peers_takes_the_default_ballast_and_one_without_takes_none(
    tiny_bpe_gguf: Path, tmp_path: Path, peers: list[str]
) -> None:
    out = tmp_path / "bench.json"
    proc = bench("--target", str(tiny_bpe_gguf), "--mode", "lookup", "--workload", "humaneval", "--limit", "1",
                 "--max-tokens", "4", *peers, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    taken = json.loads(out.read_text())["settings"]["ballast_mib"]
    # What a quarter of the available memory allows moves with the machine's load: a range, not a figure.
    assert (0 < taken <= AUTO_BALLAST_MIB) if peers else taken == 0


def test_a_negative_ballast_is_a_one_line_usage_error_before_any_model_loads(tiny_bpe_gguf: Path) -> None:
    proc = bench("--target", str(tiny_bpe_gguf), "--ballast", "-5")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == ["ds4spec: error: --ballast must be at least 0 MiB, got -5"]
