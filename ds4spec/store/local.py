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
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ds4spec.errors import ModelError
from ds4spec.paths import models_dir
from ds4spec.store.derive import fetch_derived
from ds4spec.store.manifests import (
    DerivedSource,
    LocalSource,
    Manifest,
    Pair,
    Source,
    find_manifest,
    load_manifests,
    load_pairs,
    unknown_model_error,
)
from ds4spec.store.progress import ByteProgress, ProgressListener
from ds4spec.store.sources import CHUNK, FETCHERS, Sink, SourceUnavailable

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


def sha256_file(path: Path, progress: ByteProgress | None = None) -> str:
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


def _already_good(manifest: Manifest, path: Path, progress: bool, listener: ProgressListener | None) -> bool:
    """True when the file in place is right: by its stamp, else by hashing it (which writes the stamp)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    if st.st_size != manifest.size:
        return False
    if _stamp_matches(path, st, manifest.sha256):
        return True
    return verify(manifest, progress=progress, listener=listener).ok


def pull(manifest: Manifest, *, force: bool = False, progress: bool = True,
         listener: ProgressListener | None = None) -> Path:
    """Makes the model's file present and verified; returns its path. A good file is kept unless force.

    ``listener`` hears every step of the download and of the hashing, whether or not a bar is drawn.
    """
    final = model_path(manifest)
    final.parent.mkdir(parents=True, exist_ok=True)
    with _lock(final, manifest.name):
        if not force and _already_good(manifest, final, progress, listener):
            _note(f"{manifest.name} is already downloaded and verified: {final}")
            return final
        if not force and final.exists():
            _note(f"{final} is corrupt or incomplete; downloading {manifest.name} again")
        tmp = _part_path(final)
        failures: list[str] = []
        for i, src in enumerate(manifest.sources):
            try:
                _pull_from(src, manifest, tmp, progress, listener)
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
            how = "converted" if isinstance(src, DerivedSource) else "downloaded"
            _note(f"{manifest.name} {how} and verified: {final}")
            return final
        raise ModelError(f"could not download {manifest.name}: " + "; ".join(failures))


def _pull_from(src: Source, manifest: Manifest, tmp: Path, progress: bool,
               listener: ProgressListener | None = None) -> None:
    """Fetches from one source into ``tmp`` and moves it into place if size and sha256 match."""
    final = model_path(manifest)
    sinks: list[Sink] = []
    bars: list[ByteProgress] = []
    with tmp.open("wb") as f:

        def factory() -> Sink:
            # Called once the source has something to give, so a failed connection draws no bar.
            if not bars:
                bars.append(ByteProgress(f"{manifest.name} ({src.kind})", manifest.size, progress, listener))
            sinks.append(Sink(f, manifest.size, bars[0]))
            return sinks[0]

        try:
            if isinstance(src, DerivedSource):
                base = pull(find_manifest(src.base), progress=progress, listener=listener)
                fetch_derived(base, src, manifest, factory, progress, listener)
            else:
                FETCHERS[src.kind](src, manifest, factory)
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


def verify(manifest: Manifest, *, progress: bool = False, listener: ProgressListener | None = None) -> VerifyResult:
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
    bar = ByteProgress(f"checking {manifest.name}", manifest.size, progress, listener)
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
