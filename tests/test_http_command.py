"""``ds4spec serve --http``'s command line: the address, the default, the warning without a key, and the end on
Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from http_server import ROOT, HttpServer

from ds4spec.cli import build_parser
from ds4spec.errors import UsageError
from ds4spec.faces.http.command import is_loopback, parse_address


@pytest.mark.parametrize(("text", "address"), [
    ("8080", ("127.0.0.1", 8080)), (":9000", ("127.0.0.1", 9000)), ("0.0.0.0:80", ("0.0.0.0", 80)),
    ("localhost:0", ("localhost", 0)), ("[::1]:8080", ("::1", 8080)),
])
def test_an_address_is_host_and_port_with_localhost_by_default(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["", "host:", "65536", "127.0.0.1:http", "-1", "1.5"])
def test_an_address_without_a_port_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match=r"\[HOST:\]PORT"):
        parse_address(text)


def test_http_without_a_value_listens_on_localhost_8080() -> None:
    args = build_parser().parse_args(["serve", "--http"])
    assert args.http == "127.0.0.1:8080"
    assert build_parser().parse_args(["serve", "--stdio"]).http is None


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True),
                                               ("localhost", True), ("0.0.0.0", False), ("::", False),
                                               ("192.168.1.2", False), ("example.com", False)])
def test_only_loopback_addresses_count_as_this_machine(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_stdio_and_http_together_are_a_usage_error(tiny_bpe_gguf: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "serve", "--stdio", "--http", "--target",
                           str(tiny_bpe_gguf)], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "--stdio and --http are two transports" in proc.stderr


def test_a_port_in_use_is_an_error_on_one_line(tiny_bpe_gguf: Path) -> None:
    srv = HttpServer(tiny_bpe_gguf)
    try:
        port = srv.base.rsplit(":", 1)[1]
        proc = subprocess.run([sys.executable, "-m", "ds4spec", "serve", "--http", port, "--target",
                               str(tiny_bpe_gguf)], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 1 and proc.stderr.startswith(f"ds4spec: error: cannot listen on 127.0.0.1:{port}")
    finally:
        srv.kill()


def test_bound_beyond_localhost_without_a_key_it_warns_and_with_one_it_does_not(tiny_bpe_gguf: Path) -> None:
    def warned(*extra: str) -> bool:
        srv = HttpServer(tiny_bpe_gguf, *extra, "--http", "0.0.0.0:0", wait_ready=False)
        srv.kill()
        return "warning: serving on 0.0.0.0, beyond this machine, with no API key" in srv.stderr_text()

    assert warned()
    assert not warned("--api-key", "k")


def test_ctrl_c_stops_the_server_with_exit_code_130(tiny_bpe_gguf: Path) -> None:
    srv = HttpServer(tiny_bpe_gguf)
    try:
        assert srv.terminate(signal.SIGINT) == 130
        assert "Traceback" not in srv.stderr_text()
    finally:
        srv.kill()
