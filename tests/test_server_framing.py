"""Content-Length framing: the reader on byte streams, the writer, the stdout guard, and the real server's framing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from server_client import ROOT, Server, frame, parse_frames, run_session

from ds4spec.faces.server.framing import MAX_HEADER_LINE, FrameReader, FrameWriter, FramingError, encode_frame


def read_all(data: bytes, limit: int = 1024) -> list[bytes | FramingError]:
    reader = FrameReader(io.BufferedReader(io.BytesIO(data)), limit)  # type: ignore[arg-type]
    out: list[bytes | FramingError] = []
    while (item := reader.read()) is not None:
        out.append(item)
    return out


def test_frames_round_trip_with_crlf_lf_extra_headers_and_blank_lines_between() -> None:
    data = (encode_frame(b'{"a":1}') + b"\r\n"
            + b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: 2\r\n\r\n{}"
            + b"Content-Length: 3\n\n[1]")
    assert read_all(data) == [b'{"a":1}', b"{}", b"[1]"]


def test_a_body_may_hold_newlines_and_header_like_text() -> None:
    body = b'{"text":"Content-Length: 99\\r\\n\\r\\n"}\n\n'
    assert read_all(encode_frame(body) + encode_frame(b"{}")) == [body, b"{}"]


def test_a_broken_header_block_is_reported_once_and_skipped_to_the_next_content_length() -> None:
    data = b"hello world\r\nmore junk\r\n\r\n{junk}\r\n" + encode_frame(b"{}")
    out = read_all(data)
    assert len(out) == 2 and isinstance(out[0], FramingError) and out[1] == b"{}"
    assert "not a header line" in out[0].message


def test_missing_and_invalid_content_lengths_are_framing_errors() -> None:
    for header in (b"Content-Type: x\r\n\r\n", b"Content-Length: -3\r\n\r\n", b"Content-Length: 1e3\r\n\r\n",
                   b"Content-Length: \xb2\r\n\r\n", b"Content-Length: 99999999999999999999999\r\n\r\n"):
        out = read_all(header + encode_frame(b"{}"))
        assert isinstance(out[0], FramingError), header
        assert out[1:] == [b"{}"], header


def test_an_over_long_header_line_and_too_many_headers_are_refused() -> None:
    out = read_all(b"X" * (MAX_HEADER_LINE + 10) + b"\r\n" + encode_frame(b"{}"))
    assert isinstance(out[0], FramingError) and out[-1] == b"{}"
    many = b"".join(b"X-%d: y\r\n" % i for i in range(40)) + b"Content-Length: 2\r\n\r\n{}"
    out = read_all(many + encode_frame(b"[]"))
    assert isinstance(out[0], FramingError) and out[-1] == b"[]"


def test_a_body_over_the_limit_is_refused_and_skipped_without_losing_step() -> None:
    out = read_all(encode_frame(b"x" * 5000) + encode_frame(b"{}"), limit=1024)
    assert isinstance(out[0], FramingError) and "exceeds the limit of 1024 bytes" in out[0].message
    assert out[1] == b"{}"


def test_the_end_of_input_inside_a_header_or_a_body_is_just_the_end() -> None:
    assert read_all(b"Content-Len") == []
    assert read_all(b"Content-Length: 10\r\n\r\n{}") == []
    assert read_all(b"Content-Length: 5000\r\n\r\n" + b"x" * 10, limit=100) == []


def test_the_writer_writes_whole_frames_from_many_threads() -> None:
    sink = io.BytesIO()
    writer = FrameWriter(sink)  # type: ignore[arg-type]

    def write(n: int) -> None:
        for i in range(50):
            writer.write(json.dumps({"jsonrpc": "2.0", "method": "partial", "params": {"id": n, "text": "é" * i}})
                         .encode())

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    messages = parse_frames(sink.getvalue())
    assert len(messages) == 200


def test_the_writer_turns_off_when_the_reader_is_gone() -> None:
    r, w = os.pipe()
    os.close(r)
    writer = FrameWriter(os.fdopen(w, "wb"))
    assert writer.write(b"{}") is False and writer.closed
    assert writer.write(b"{}") is False


def test_stray_output_after_claiming_stdout_goes_to_stderr() -> None:
    code = (
        "import os, sys\n"
        "from ds4spec.faces.server.stdio import claim_stdout\n"
        "proto = claim_stdout()\n"
        "print('a stray print')\n"
        "sys.stdout.flush()\n"
        "os.write(1, b'a C library writing to fd 1\\n')\n"
        "proto.write(b'PROTOCOL'); proto.flush()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"PROTOCOL"
    assert b"a stray print" in proc.stderr and b"a C library writing to fd 1" in proc.stderr


def test_the_server_answers_framing_errors_and_keeps_serving(tiny_bpe_gguf: Path) -> None:
    data = (b"garbage without a header\r\n\r\n"  # bad framing: skipped up to the next Content-Length
            + frame(b'{"bad json" ')  # well framed, not JSON
            + b"Content-Length: " + b"9" * 30 + b"\r\n\r\n"  # not a byte count
            + frame({"jsonrpc": "2.0", "id": 1, "method": "stats"}))
    proc = run_session(tiny_bpe_gguf, data)
    assert proc.returncode == 0, proc.stderr
    messages = parse_frames(proc.stdout)
    codes = [m["error"]["code"] if "error" in m else "ok" for m in messages]
    assert codes == [-32600, -32700, -32600, "ok"], messages
    assert messages[-1]["id"] == 1 and messages[-1]["result"]["requests"] == 1


def test_a_message_over_8_mib_is_refused_and_the_next_one_is_answered(tiny_bpe_gguf: Path) -> None:
    huge = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "complete",
                       "params": {"prefix": "x" * (8 * 1024 * 1024 + 1)}}).encode()
    server = Server(tiny_bpe_gguf)
    try:
        server.send_raw(frame(huge))
        refused = server.next_message()
        assert refused is not None and refused["id"] is None
        assert refused["error"]["code"] == -32600
        assert "exceeds the limit of 8388608 bytes" in refused["error"]["message"]
        assert "result" in server.call("stats")
        assert server.finish() == 0
    finally:
        server.kill()


def test_a_frame_split_into_single_bytes_is_read_whole(tiny_bpe_gguf: Path) -> None:
    server = Server(tiny_bpe_gguf)
    try:
        for byte in frame({"jsonrpc": "2.0", "id": "é", "method": "stats"}):
            server.send_raw(bytes([byte]))
        assert "result" in server.response("é")
        assert server.finish() == 0
    finally:
        server.kill()
