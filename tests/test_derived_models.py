"""Models derived on this machine: another model's weights in another storage, written by llama.cpp's own
quantize function from a tiny real GGUF file, then hashed and moved into place like any download."""

from __future__ import annotations

import hashlib
from pathlib import Path

import gguf
import pytest
from test_store import isolate, leftovers, local_source, write_manifest

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.errors import ModelError
from ds4spec.store import local as store
from ds4spec.store.derive import quantize_file
from ds4spec.store.manifests import Manifest
from ds4spec.store.progress import ByteProgress

FILE_TYPES = {"F32": gguf.LlamaFileType.ALL_F32, "F16": gguf.LlamaFileType.MOSTLY_F16,
              "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


def derived_once(base: Path, out: Path, quantization: str) -> bytes:
    quantize_file(base, out, quantization, ByteProgress("test", 1, enabled=False))
    return out.read_bytes()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    isolate(monkeypatch, h)
    return h


@pytest.fixture
def base(home: Path, tiny_bpe_gguf: Path) -> Manifest:
    """The tiny float32 model as a model of its own, pulled from a local file."""
    payload = tiny_bpe_gguf.read_bytes()
    return write_manifest(home, [local_source(home, payload, "tiny.gguf")], name="tiny-base", payload=payload)


def derived_manifest(home: Path, base: Manifest, quantization: str, payload: bytes, **kw: str) -> Manifest:
    source = {"kind": "derived", "from": base.name, "quantization": quantization}
    return write_manifest(home, [source], name=f"tiny-{quantization.lower()}", payload=payload, **kw)


@pytest.mark.parametrize("quantization", ["F32", "F16", "Q8_0"])
def test_derivation_is_deterministic_so_a_manifest_can_name_its_sha256(
        tiny_bpe_gguf: Path, tmp_path: Path, quantization: str) -> None:
    first = derived_once(tiny_bpe_gguf, tmp_path / "a.gguf", quantization)
    assert first == derived_once(tiny_bpe_gguf, tmp_path / "b.gguf", quantization)
    assert gguf.GGUFReader(tmp_path / "a.gguf").get_field("general.file_type").contents() == \
        FILE_TYPES[quantization]


@pytest.mark.parametrize("quantization", ["F32", "F16", "Q8_0"])
def test_pull_derives_the_file_pulling_its_base_first_and_it_evaluates_like_the_base(
        home: Path, base: Manifest, tmp_path: Path, quantization: str) -> None:
    expected = derived_once(home / "manifests" / "tiny.gguf", tmp_path / "scratch.gguf", quantization)
    derived = derived_manifest(home, base, quantization, expected)
    heard: list[str] = []
    path = store.pull(derived, progress=False, listener=lambda label, done, total: heard.append(label))
    assert path.read_bytes() == expected and store.model_status(derived) == "verified"
    assert store.model_status(base) == "verified"  # the base was pulled on the way
    assert f"tiny-{quantization.lower()} (converting tiny-base to {quantization})" in heard
    assert leftovers(home) == [] and not list((home / "models").glob("*.converting"))
    assert store.resolve_model(derived.name).path == path
    tokens = [1, 2, 3, 4, 5]
    with LlamaTarget(store.model_path(base), TargetOptions(n_ctx=64, n_gpu_layers=0)) as t:
        want = t.eval_prompt(tokens)
    with LlamaTarget(path, TargetOptions(n_ctx=64, n_gpu_layers=0)) as t:
        got = t.eval_prompt(tokens)
    assert abs(got - want).max() < 0.05 * abs(want).max()  # the same weights, stored with less precision


def test_a_derived_file_of_another_sha256_is_refused_and_nothing_is_left(home: Path, base: Manifest,
                                                                         tmp_path: Path) -> None:
    expected = derived_once(home / "manifests" / "tiny.gguf", tmp_path / "scratch.gguf", "F16")
    derived = derived_manifest(home, base, "F16", expected, sha256=hashlib.sha256(b"other").hexdigest())
    with pytest.raises(ModelError, match=r"could not download tiny-f16: derived: gave a file with sha256 "):
        store.pull(derived, progress=False)
    assert not store.model_path(derived).exists()
    assert leftovers(home) == [] and not list((home / "models").glob("*.converting"))


def test_a_base_that_cannot_be_pulled_fails_the_derivation_naming_it(home: Path, base: Manifest,
                                                                    tmp_path: Path) -> None:
    (home / "manifests" / "tiny.gguf").unlink()
    derived = derived_manifest(home, base, "F16", b"GGUF")
    with pytest.raises(ModelError, match="could not download tiny-base"):
        store.pull(derived, progress=False)
