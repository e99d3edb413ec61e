"""``ds4spec serve --stdio``: the command, the read loop, and the guard that keeps stdout for the protocol.

At start-up the real stdout is duplicated for protocol frames and file descriptor 1 is pointed at stderr,
so that nothing else (a stray print, a C library's message) can ever put a byte on the protocol stream.
The main thread reads frames and dispatches them; the end of stdin, ``exit``, or a reader that went away
(broken pipe) ends the loop, and everything is stopped and freed before the process exits.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import BinaryIO

from ds4spec.engine.loading import check_settings
from ds4spec.engine.options import add_model_options, add_sampling_options, add_speculation_options, settings_from_args
from ds4spec.errors import UsageError
from ds4spec.faces.server import rpc
from ds4spec.faces.server.framing import MAX_MESSAGE_BYTES, FrameReader, FrameWriter, FramingError
from ds4spec.faces.server.rpc import RpcError
from ds4spec.faces.server.service import Service
from ds4spec.faces.shared.engine_worker import Closed

log = logging.getLogger("ds4spec.faces.server")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``serve`` command with its stdio transport; the command line adds the HTTP one (``faces.http``)."""
    p = subparsers.add_parser(
        "serve",
        help="serve editors (JSON-RPC over stdin/stdout) or OpenAI-compatible clients (HTTP)",
        description="Serves completions (fill-in-the-middle included) and chat: to an editor over stdin and "
        "stdout, framed like LSP (--stdio, docs/protocol.md), or to OpenAI-compatible clients over HTTP "
        "(--http, docs/http.md). The flags set the models and the defaults of every request; logs go to "
        "stderr.",
    )
    p.add_argument("--stdio", action="store_true", help="talk JSON-RPC over stdin/stdout")
    add_model_options(p)
    add_speculation_options(p)
    add_sampling_options(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    if not args.stdio:
        raise UsageError("serve needs a transport: --stdio (editors) or --http [HOST:]PORT (OpenAI clients)")
    settings = settings_from_args(args)
    check_settings(settings)  # usage errors end the command before it serves anything
    writer = FrameWriter(claim_stdout())
    service = Service(settings, writer, max_message_bytes=MAX_MESSAGE_BYTES)
    service.start()
    code = 130
    try:
        code = serve(FrameReader(sys.stdin.buffer, MAX_MESSAGE_BYTES), writer, service)
    finally:
        closed = service.close()
        if closed is not Closed.FREED:
            # The worker is inside llama.cpp: freeing the model under it could crash, so leave now.
            print(f"ds4spec: {closed.value}", file=sys.stderr, flush=True)
            os._exit(code)
    return code


def claim_stdout() -> BinaryIO:
    """A private handle on the real stdout for protocol frames; fd 1 (and ``sys.stdout``) now reach stderr."""
    sys.stdout.flush()
    protocol = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return os.fdopen(protocol, "wb")


def serve(reader: FrameReader, writer: FrameWriter, service: Service) -> int:
    """Reads and dispatches until the end of input (0), ``exit`` (0 after ``shutdown``, else 1, as in LSP),
    or a client that stopped reading (0)."""
    while not writer.closed:
        frame = reader.read()
        if frame is None:
            log.debug("end of input")
            return 0
        if isinstance(frame, FramingError):
            writer.write(rpc.error(None, RpcError(rpc.INVALID_REQUEST, frame.message)))
            continue
        try:
            req = rpc.parse(frame)
        except RpcError as err:
            writer.write(rpc.error(err.request_id, err))
            continue
        if req is None:
            continue
        if req.method == "exit":
            return 0 if service.shut_down else 1
        try:
            service.handle(req)
        except Exception as err:  # a bug in one method must not end the session
            log.exception("handling %s failed", req.method)
            if not req.notification:
                writer.write(rpc.error(req.id, RpcError(rpc.INTERNAL_ERROR, f"internal error: {err}")))
    return 0
