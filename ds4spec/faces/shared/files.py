"""Reading a file the user names into the conversation: what is refused (one line each), and how it is named.

A path is kept as the user's absolute path, not resolved: a symlink stays the link, so that ``/apply`` writes
through it to the file it points at instead of replacing it. The model is shown the path relative to the
working directory when the file is under it.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shlex
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ds4spec.engine.context_files import ContextFile
from ds4spec.errors import InputError

BINARY_SNIFF = 8192  # a NUL byte in the first 8 KiB: a binary file, as git decides
_GLOB = set("*?[")
MAX_FILE_BYTES = 16 * 2**20  # a million tokens of code is about 4 MiB: no context holds more


@dataclass(frozen=True, slots=True)
class FileSnapshot:
    path: Path  # absolute, a symlink not resolved
    text: str
    sha256: str  # of the bytes on disk, to tell whether the file changed since

    @property
    def name(self) -> str:
        return shown_name(self.path)

    def context(self) -> ContextFile:
        return ContextFile(self.name, self.text)


def absolute(path: str | Path) -> Path:
    """The user's path made absolute against the working directory, ``~`` expanded, links kept."""
    return Path(os.path.abspath(Path(path).expanduser()))


def shown_name(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_file(path: Path) -> FileSnapshot:
    """The file's text; ``InputError`` for a missing path, a directory, something that is not a regular file, a file
    too large for any context, an unreadable, binary or non-UTF-8 file."""
    name = shown_name(path)
    try:
        status = path.stat()
        if stat.S_ISDIR(status.st_mode):
            raise InputError(f"{name} is a directory: name its files, or a pattern such as {name}/*.py")
        # Read, /dev/zero took all memory and a named pipe waited for a writer forever.
        if not stat.S_ISREG(status.st_mode):
            raise InputError(f"{name} is not a regular file (a device, a pipe or a socket)")
        if status.st_size > MAX_FILE_BYTES:
            raise InputError(f"{name} is {status.st_size / 2**20:,.0f} MiB, more text than any context holds")
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"no such file: {name}") from None
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}") from None
    return snapshot_of(path, data)


def snapshot_of(path: Path, data: bytes) -> FileSnapshot:
    """``data``, read from ``path``, as text; ``InputError`` for a binary or non-UTF-8 file."""
    name = shown_name(path)
    if b"\x00" in data[:BINARY_SNIFF]:
        raise InputError(f"{name} is a binary file, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    return FileSnapshot(path, text, sha256(data))


def expand(arguments: str) -> list[Path]:
    """The paths named by ``arguments``: words as a shell splits them, each a path or a glob (``**`` included).
    A pattern that matches no file, or unbalanced quotes, is an ``InputError``."""
    try:
        words = shlex.split(arguments)
    except ValueError as exc:
        raise InputError(f"cannot read the paths: {exc}") from None
    paths: list[Path] = []
    for word in words:
        # A file whose name holds pattern characters (``pages/[id].tsx``) is itself, quoted or not, as in a shell
        # where its pattern matches nothing.
        if _GLOB & set(word) and not os.path.isfile(os.path.expanduser(word)):
            matched = sorted(m for m in glob.glob(os.path.expanduser(word), recursive=True) if not os.path.isdir(m))
            if not matched:
                raise InputError(f"no file matches {word}")
            paths += [absolute(m) for m in matched]
        else:
            paths.append(absolute(word))
    return list(dict.fromkeys(paths))


def write_atomically(path: Path, text: str) -> str:
    """Writes ``text`` to a temporary file beside the real one and renames it over it, keeping the mode; a
    symlink is written through. Returns the new sha256; ``InputError`` when the write is not permitted."""
    real = Path(os.path.realpath(path))
    name = shown_name(path)
    data = text.encode("utf-8")
    try:
        mode = real.stat().st_mode & 0o7777
    except OSError as exc:
        raise InputError(f"cannot write {name}: {exc.strerror or exc}") from None
    # A file without any write bit is read-only by intent: refused even where root could write it anyway.
    if not mode & 0o222 or not os.access(real, os.W_OK) or not os.access(real.parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {name}: it is read-only or its folder is not writable")
    try:
        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".ds4spec")
    except OSError as exc:
        raise InputError(f"cannot write {name}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise InputError(f"cannot write {name}: {exc.strerror or exc}") from None
    return sha256(data)
