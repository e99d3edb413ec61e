"""Content-Length framing, as LSP does it: ``Content-Length: N\\r\\n\\r\\n`` then N bytes of JSON.

The reader never trusts its input: header lines and bodies are bounded, a broken header block is reported
once and skipped up to the next ``Content-Length`` line, and an over-long body is read and thrown away in
small pieces so that the stream stays in step without holding it in memory.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import BinaryIO

MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # one JSON body; editors send a buffer at most, and 8 MiB is plenty
MAX_HEADER_LINE = 4096  # bytes in one header line
MAX_HEADERS = 32  # lines in one header block
_DISCARD_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class FramingError:
    """A frame that could not be read; the reader has already skipped past it."""

    message: str


class FrameReader:
    """Reads framed bodies from a binary stream: ``read()`` gives bytes, a ``FramingError``, or None at the end."""

    def __init__(self, stream: BinaryIO, limit: int = MAX_MESSAGE_BYTES) -> None:
        self._stream = stream
        self._limit = limit
        self._resync = False  # after a bad header block: skip lines until the next Content-Length header

    def read(self) -> bytes | FramingError | None:
        headers: dict[str, str] = {}
        while True:
            line = self._stream.readline(MAX_HEADER_LINE + 1)
            if not line or (len(line) <= MAX_HEADER_LINE and not line.endswith(b"\n")):
                return None  # end of input, between or inside frames alike (readline stops short only there)
            if self._resync:
                if not line.lower().startswith(b"content-length:"):
                    continue
                self._resync = False
            if len(line) > MAX_HEADER_LINE and not line.endswith(b"\n"):
                return self._broken(f"a header line is longer than {MAX_HEADER_LINE} bytes")
            text = line.rstrip(b"\r\n")
            if not text:
                if not headers:
                    continue  # blank lines between frames are tolerated
                break
            name, colon, value = text.partition(b":")
            if not colon or not name.strip():
                return self._broken(f"not a header line: {_show(text)}")
            if len(headers) >= MAX_HEADERS:
                return self._broken(f"more than {MAX_HEADERS} header lines")
            headers[name.strip().decode("latin-1").lower()] = value.strip().decode("latin-1")
        raw = headers.get("content-length")
        if raw is None:
            return self._broken("the header block has no Content-Length")
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
            return self._broken(f"Content-Length is not a byte count: {raw[:40]!r}")
        length = int(raw)
        if length > self._limit:
            if not self._discard(length):
                return None
            return FramingError(f"a message of {length} bytes exceeds the limit of {self._limit} bytes; refused")
        body = self._stream.read(length)
        if len(body) < length:
            return None  # the input ended inside the body
        return body

    def _broken(self, message: str) -> FramingError:
        self._resync = True
        return FramingError(f"bad framing: {message}")

    def _discard(self, length: int) -> bool:
        """Reads and drops ``length`` bytes; False when the input ends first."""
        while length > 0:
            got = self._stream.read(min(length, _DISCARD_CHUNK))
            if not got:
                return False
            length -= len(got)
        return True


def _show(text: bytes) -> str:
    return repr(text[:40].decode("utf-8", "replace")) + ("..." if len(text) > 40 else "")


def encode_frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class FrameWriter:
    """The only way to the protocol stream: one lock, whole frames, flushed at once.

    A reader that went away (broken pipe) turns the writer off; ``closed`` tells the server to stop.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.closed = False

    def write(self, body: bytes) -> bool:
        frame = encode_frame(body)
        with self._lock:
            if self.closed:
                return False
            try:
                self._stream.write(frame)
                self._stream.flush()
            except (BrokenPipeError, ConnectionResetError, ValueError, OSError):
                self.closed = True
                return False
        return True
