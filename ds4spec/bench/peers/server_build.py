"""llama.cpp's own ``llama-server``, built once from the llama.cpp that the installed llama-cpp-python vendors.

The comparison is only fair if the server runs the same kernels as ds4spec: the same llama.cpp commit and the
same CMake flags. ``scripts/setup.sh`` records both in the virtual environment (``llama-cpp-build.txt``: the
build's key, then its flags); the server is built from the sdist of the installed version, with those flags, into
``<cache>/wheels/llama-cpp-python-<key>/llama-server/``, beside the wheel of the same build, and reused from
there. The build is offline apart from the sdist (PyPI; ``DS4SPEC_LLAMA_SDIST`` names a local copy): no curl, no
OpenSSL, no prebuilt web UI. Every reason it cannot happen is a :class:`ServerUnavailable` with one line.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ds4spec.backend.runtime import available_cores
from ds4spec.paths import cache_dir

BUILD_RECORD = "llama-cpp-build.txt"  # written by scripts/setup.sh into the virtual environment
BINARY = "llama-server"
# The server alone, statically linked (one file to cache), with nothing that reaches the network.
SERVER_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
                "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_UI=OFF",
                "-DLLAMA_USE_PREBUILT_UI=OFF")
COMPILERS = ("c++", "g++", "clang++")


class ServerUnavailable(Exception):
    """llama-server cannot be built or found; the message is one line for the bench's table."""


@dataclass(frozen=True, slots=True)
class ServerBuild:
    """Where one llama-server build lives and what it is built from."""

    version: str  # llama-cpp-python's, whose sdist vendors the llama.cpp to build
    key: str  # setup.sh's key of the build (version, flags, Python)
    flags: tuple[str, ...]  # setup.sh's CMake flags
    cache: Path  # ds4spec's cache folder
    sdist: Path | None = None  # a local sdist instead of PyPI's

    @property
    def folder(self) -> Path:
        return self.cache / "wheels" / f"llama-cpp-python-{self.key}" / BINARY

    @property
    def binary(self) -> Path:
        return self.folder / BINARY

    @property
    def log(self) -> Path:
        return self.folder / "build.log"

    def missing_tools(self) -> str | None:
        """What the build needs that this machine lacks, or None (nothing to check once built)."""
        if self.binary.is_file():
            return None
        if not shutil.which("cmake"):
            return "building llama-server needs cmake, which is not on PATH"
        compiler = os.environ.get("CXX")
        if not (shutil.which(compiler) if compiler else any(shutil.which(c) for c in COMPILERS)):
            return f"building llama-server needs a C++ compiler ({compiler or ', '.join(COMPILERS)}), none on PATH"
        return None

    def ensure(self, log: Callable[[str], None]) -> Path:
        """The server's path, built first if it is not cached; one build at a time per cache (a file lock)."""
        if self.binary.is_file():
            return self.binary
        problem = self.missing_tools()
        if problem:
            raise ServerUnavailable(problem)
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self.binary.is_file():  # another process may have built it while this one waited
                self._build(log)
        return self.binary

    def _build(self, log: Callable[[str], None]) -> None:
        cores = available_cores()
        how_long = "tens of minutes: CUDA kernels" if "-DGGML_CUDA=ON" in self.flags else "minutes"
        log(f"ds4spec: building llama-server from llama-cpp-python {self.version}'s llama.cpp, once, into "
            f"{self.folder} ({how_long}; 4 on 2 cores for the CPU)")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="llama-server-", dir=self.folder) as work:
            source = self._unpack(Path(work))
            build = Path(work) / "build"
            with open(self.log, "w") as out:
                for step in (["cmake", "-S", str(source), "-B", str(build), *self.flags, *SERVER_FLAGS],
                             ["cmake", "--build", str(build), "--target", BINARY, "-j", str(cores)]):
                    out.write(f"$ {' '.join(step)}\n")
                    out.flush()
                    if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False).returncode:
                        raise ServerUnavailable(f"building llama-server failed: {_last_error(self.log)} "
                                                f"(whole log: {self.log})")
            built = build / "bin" / BINARY
            if not built.is_file():
                raise ServerUnavailable(f"the llama-server build wrote no {built} (log: {self.log})")
            staged = self.folder / f"{BINARY}.tmp"
            shutil.copy2(built, staged)
            staged.replace(self.binary)  # complete or absent: never a half-copied server
        log(f"ds4spec: built llama-server in {(time.monotonic() - started) / 60:.1f} minutes")

    def _unpack(self, work: Path) -> Path:
        sdist = self.sdist or _download_sdist(self.version, work)
        try:
            with tarfile.open(sdist) as archive:
                archive.extractall(work, filter="data")
        except (OSError, tarfile.TarError) as exc:
            raise ServerUnavailable(f"cannot unpack {sdist}: {exc}") from None
        found = sorted(work.glob("*/vendor/llama.cpp/CMakeLists.txt"))
        if not found:
            raise ServerUnavailable(f"{sdist.name} carries no vendor/llama.cpp")
        return found[0].parent


def _download_sdist(version: str, work: Path) -> Path:
    step = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--dest", str(work),
            f"llama-cpp-python=={version}"]
    proc = subprocess.run(step, capture_output=True, text=True, check=False)
    found = sorted(work.glob("llama_cpp_python-*.tar.gz"))
    if proc.returncode or not found:
        why = (proc.stderr.strip().splitlines() or ["no sdist"])[-1]
        raise ServerUnavailable(f"cannot download llama-cpp-python {version}'s sdist from PyPI: {why}")
    return found[0]


def _last_error(log: Path) -> str:
    """The build's first error (with the line after it when CMake puts the message there), else its last line."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    at = next((i for i, ln in enumerate(lines) if "error" in ln.lower()), None)
    if at is None:
        line = lines[-1] if lines else "no output"
    else:
        line = lines[at] + (f" {lines[at + 1]}" if lines[at].endswith(":") and at + 1 < len(lines) else "")
    return line if len(line) <= 200 else line[:197] + "..."


def installed_build(cache: Path | None = None, prefix: Path | None = None) -> ServerBuild:
    """The build that matches the installed llama-cpp-python, as ``scripts/setup.sh`` recorded it in the
    environment ``prefix`` (this interpreter's by default)."""
    try:
        version = metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        raise ServerUnavailable("llama-cpp-python is not installed") from None
    record = (prefix or Path(sys.prefix)) / BUILD_RECORD
    try:
        key, flags = [*record.read_text().splitlines(), "", ""][:2]
    except OSError:
        raise ServerUnavailable(f"llama-cpp-python's build flags are unknown ({record} is missing): install with "
                                "scripts/setup.sh, so that llama-server is built as ds4spec's llama.cpp is") from None
    sdist = os.environ.get("DS4SPEC_LLAMA_SDIST")
    return ServerBuild(version, key.strip(), tuple(flags.split()), cache or cache_dir(),
                       Path(sdist).expanduser() if sdist else None)
