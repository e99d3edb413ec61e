"""``ds4spec serve --http [HOST:]PORT``: the flags, the listening socket, uvicorn, and a clean end on SIGINT/SIGTERM.

The models load in the background while the socket already answers (``/health`` is 503 until they are
ready). A signal stops the queue at once: waiting requests get 503, the running one stops within one
speculative cycle and is answered with its text so far; uvicorn then closes the connections and the models
are freed.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType

from ds4spec.engine.loading import check_settings, target_name
from ds4spec.engine.options import settings_from_args
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error, UsageError

DEFAULT_ADDRESS = "127.0.0.1:8080"
API_KEY_ENV = "DS4SPEC_API_KEY"
DEFAULT_MAX_QUEUE = 16


def add_http_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("HTTP: the OpenAI-compatible API (see docs/http.md)")
    g.add_argument("--http", nargs="?", const=DEFAULT_ADDRESS, metavar="[HOST:]PORT",
                   help=f"serve OpenAI's HTTP API on HOST:PORT (default {DEFAULT_ADDRESS}; HOST defaults to "
                   "127.0.0.1; PORT 0 picks a free port)")
    g.add_argument("--api-key", metavar="KEY", help=f"require 'Authorization: Bearer KEY' (default: ${API_KEY_ENV}; "
                   "none: no key needed)")
    g.add_argument("--max-queue", type=int, default=DEFAULT_MAX_QUEUE, metavar="N",
                   help=f"requests that may wait for the model; more get 429 (default {DEFAULT_MAX_QUEUE})")


def parse_address(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[IPv6]:PORT``; the host defaults to 127.0.0.1."""
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    if not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise UsageError(f"--http takes [HOST:]PORT with a port from 0 to 65535, got {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def model_id(settings: Settings) -> str:
    """The name /v1/models lists: the target's manifest name, or its file's name without ``.gguf``."""
    name = target_name(settings)
    return Path(name).stem if name.endswith(".gguf") or os.sep in name else name


def run(args: argparse.Namespace) -> int:
    if args.stdio:
        raise UsageError("--stdio and --http are two transports; give one of them")
    host, port = parse_address(args.http)
    settings = settings_from_args(args)
    check_settings(settings)  # usage errors end the command before it serves anything
    if args.max_queue < 0:
        raise UsageError(f"--max-queue must be at least 0, got {args.max_queue}")
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    if not is_loopback(host) and api_key is None:
        print(f"ds4spec: warning: serving on {host}, beyond this machine, with no API key: anyone who can reach "
              f"it can use the model (set --api-key or ${API_KEY_ENV})", file=sys.stderr, flush=True)
    listener = _listen(host, port)

    import uvicorn  # only here: `serve --help` and the editor server never load the HTTP stack

    from ds4spec.faces.http.app import HttpOptions, build_app
    from ds4spec.faces.http.scheduler import Scheduler
    from ds4spec.faces.shared.engine_worker import Closed

    scheduler = Scheduler(settings, args.max_queue)
    scheduler.start()
    app = build_app(scheduler, HttpOptions(model_id(settings), api_key))
    verbose = bool(getattr(args, "verbose", False))
    config = uvicorn.Config(app, log_config=None, log_level="info" if verbose else "warning", access_log=verbose,
                            lifespan="off", timeout_graceful_shutdown=30)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            # A signal handler must not wait on the scheduler's lock (the loop thread may hold it): a thread does.
            threading.Thread(target=scheduler.stop_all, name="ds4spec-shutdown", daemon=True).start()
            super().handle_exit(sig, frame)

    bound_host, bound_port = listener.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"ds4spec: serving the OpenAI API on http://{shown}:{bound_port}/v1 (model {model_id(settings)!r}); "
          "the models are loading", file=sys.stderr, flush=True)
    # uvicorn hands a caught SIGTERM back to the handler it found: ours makes it a clean exit, code 0.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    code = 130  # uvicorn hands a caught SIGINT back as KeyboardInterrupt: the command line's exit code 130
    try:
        Server(config).run(sockets=[listener])
        code = 0
    finally:
        closed = scheduler.close()
        if closed is not Closed.FREED:
            print(f"ds4spec: {closed.value}", file=sys.stderr, flush=True)
            os._exit(code if closed is Closed.LOADING else 1)  # a stop asked for during the load is a clean one
    return 0


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, UnicodeError) as err:
        sock.close()
        raise Ds4Error(f"cannot listen on {host}:{port}: {err}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
