"""A model run on the CPU is read into the process's memory, where huge pages reach it, when that pays and is safe;
``--mmap`` and ``--no-mmap`` decide instead. Either way llama.cpp computes the same logits."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ds4spec.backend.huge_pages import anonymous_huge_pages, huge_pages_asked
from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.backend.weights_memory import memory_available, reads_weights
from ds4spec.bench.peers.base import PeerSetup, TargetVocab
from ds4spec.bench.peers.llama_plain import LlamaPlainPeer
from ds4spec.cli import build_parser
from ds4spec.engine.loading import drafter_spec
from ds4spec.engine.options import settings_from_args
from ds4spec.engine.settings import load_settings
from ds4spec.faces.complete import complete_settings

GIB = 1 << 30


@pytest.mark.parametrize(("mmap", "gpu_layers", "size", "available", "huge", "reads"), [
    (None, 0, GIB, 8 * GIB, True, True),
    (None, -1, GIB, 8 * GIB, True, False),
    (None, 12, GIB, 8 * GIB, True, False),
    (None, 0, GIB, 8 * GIB, False, False),
    (None, 0, 5 * GIB, 8 * GIB, True, False),
    (None, 0, GIB, None, True, False),
    (True, 0, GIB, 8 * GIB, True, False),
    (False, -1, 5 * GIB, 8 * GIB, False, True),
], ids=["cpu-huge-pages-fits", "every-layer-on-a-gpu", "some-layers-on-a-gpu", "no-huge-pages",
        "more-than-half-the-free-memory", "free-memory-unknown", "user-says-mmap", "user-says-no-mmap"])
def test_weights_are_read_only_where_that_pays_and_is_safe_unless_the_user_decides(
        mmap: bool | None, gpu_layers: int, size: int, available: int | None, huge: bool, reads: bool) -> None:
    assert reads_weights(mmap, n_gpu_layers=gpu_layers, file_size=size, available=available,
                         huge_pages=huge) is reads


@pytest.mark.parametrize(("tunables", "asked"), [
    ("glibc.malloc.hugetlb=1", True), ("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2", True),
    ("glibc.malloc.hugetlb=0", False), ("glibc.malloc.arena_max=2", False), ("", False),
], ids=["one", "hugetlbfs-after-another", "zero", "another-tunable", "none"])
def test_glibc_asks_for_huge_pages_when_its_tunable_is_not_zero(tunables: str, asked: bool) -> None:
    assert huge_pages_asked({"GLIBC_TUNABLES": tunables}) is asked


@pytest.mark.parametrize(("mode", "tunables", "huge"), [
    ("always", "", True), ("madvise", "glibc.malloc.hugetlb=1", True), ("madvise", "", False),
    ("never", "glibc.malloc.hugetlb=1", False), (None, "glibc.malloc.hugetlb=1", False),
], ids=["kernel-gives-to-all", "madvise-asked", "madvise-not-asked", "never", "no-thp"])
def test_the_process_memory_is_on_huge_pages_by_the_kernel_s_mode_and_the_tunable(
        mode: str | None, tunables: str, huge: bool) -> None:
    assert anonymous_huge_pages({"GLIBC_TUNABLES": tunables}, mode) is huge


def test_free_memory_is_read_from_meminfo_and_unknown_without_it(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683520 kB\nMemFree:        19107756 kB\nMemAvailable:   24177152 kB\n")
    assert memory_available(meminfo) == 24177152 * 1024
    meminfo.write_text("MemTotal:       24683520 kB\n")
    assert memory_available(meminfo) is None
    assert memory_available(tmp_path / "missing") is None


@pytest.mark.parametrize(("argv", "env", "mmap"), [
    ([], {}, None), (["--mmap"], {}, True), (["--no-mmap"], {}, False), ([], {"DS4SPEC_MMAP": "false"}, False),
    (["--mmap"], {"DS4SPEC_MMAP": "false"}, True),
], ids=["default", "flag", "negated-flag", "environment", "flag-over-environment"])
def test_the_choice_reaches_the_target_and_the_drafter(argv: list[str], env: dict[str, str], mmap: bool | None,
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4SPEC_CONFIG", str(tmp_path / "absent.toml"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = settings_from_args(build_parser().parse_args(["complete", *argv]))
    assert settings.target_options().mmap is mmap and drafter_spec(settings).mmap is mmap


@pytest.mark.parametrize(("argv", "mmap"), [([], True), (["--no-mmap"], False), (["--mmap"], True)],
                         ids=["default", "no-mmap", "mmap"])
def test_complete_answers_once_so_it_maps_the_file_unless_told(argv: list[str], mmap: bool, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4SPEC_CONFIG", str(tmp_path / "absent.toml"))
    assert complete_settings(build_parser().parse_args(["complete", *argv])).mmap is mmap


def test_the_config_file_can_keep_the_mapping(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("mmap = true\n")
    assert load_settings(env={}, path=cfg).mmap is True


@pytest.mark.parametrize("mmap", [True, False], ids=["mapped", "read"])
def test_the_in_process_llama_cpp_peer_loads_the_target_as_ds4spec_does(mmap: bool, tiny_bpe_gguf: Path) -> None:
    with TargetVocab(tiny_bpe_gguf) as vocab:
        peer = LlamaPlainPeer(PeerSetup(tiny_bpe_gguf, vocab.tokenizer, 64, 64, None, 0, None, mmap=mmap))
        assert peer._llama_kwargs()["use_mmap"] is mmap


def _maps_file(path: Path) -> bool:
    return str(path) in Path("/proc/self/maps").read_text()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the process's mappings from /proc")
def test_read_weights_leave_no_mapping_and_give_the_logits_the_mapped_ones_give(tiny_bpe_gguf: Path,
                                                                               tmp_path: Path) -> None:
    # A copy of its own, so that no other test's model maps the same file.
    path = tmp_path / "tiny.gguf"
    shutil.copyfile(tiny_bpe_gguf, path)
    tokens = [5, 17, 40, 41, 42, 99, 3, 3, 8]
    rows = {}
    for mmap in (True, False):
        with LlamaTarget(path, TargetOptions(n_ctx=64, n_gpu_layers=0, mmap=mmap)) as target:
            assert target.weights_read is not mmap
            assert _maps_file(path) is mmap
            rows[mmap] = target.eval_span(tokens).copy()
    np.testing.assert_array_equal(rows[True], rows[False])
