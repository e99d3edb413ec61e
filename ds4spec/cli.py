"""The ``ds4spec`` command: parses arguments and hands each subcommand to its face.

Every error reaches the user as one line, ``ds4spec: error: ...``, with exit code 2 for usage and input
errors and 1 for runtime failures; Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from ds4spec import __version__
from ds4spec.backend.huge_pages import restart_with_huge_pages
from ds4spec.errors import Ds4Error, UsageError


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, like every other ds4spec error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _sub(subparsers: argparse._SubParsersAction, name: str, **kwargs: object) -> argparse.ArgumentParser:
    return subparsers.add_parser(name, **kwargs)  # type: ignore[no-any-return]


def build_parser() -> argparse.ArgumentParser:
    from ds4spec.bench import command as bench
    from ds4spec.faces import complete, doctor
    from ds4spec.faces import models as cli_models
    from ds4spec.faces.chat import command as chat
    from ds4spec.faces.http import command as serve_http
    from ds4spec.faces.repl import command as repl
    from ds4spec.faces.server import stdio as serve

    parser = _Parser(
        prog="ds4spec",
        description="A local coding assistant: a big GGUF target model, made faster by speculative decoding.",
    )
    parser.add_argument("--version", action="version", version=f"ds4spec {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what ds4spec and llama.cpp do")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    complete.register(subparsers)
    chat.register(subparsers)
    repl.register(subparsers)
    cli_models.register(subparsers)
    bench.register(subparsers)
    doctor.register(subparsers)
    serve_parser = serve.register(subparsers)
    serve_http.add_http_options(serve_parser)
    serve_parser.set_defaults(func=lambda args: (serve_http.run if args.http is not None else serve.run)(args))
    return parser


def console() -> int:
    """The ``ds4spec`` command: ``main`` in a process whose allocator asks for huge pages where the kernel gives them
    only on request (``ds4spec.backend.huge_pages``: it restarts the process once)."""
    restart_with_huge_pages()
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    # A process started in the background of a script inherits SIGINT as ignored, and Python then never
    # turns Ctrl-C into KeyboardInterrupt; ds4spec's cancel path relies on it, so claim it explicitly.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _run(argv)
    except KeyboardInterrupt:
        print("ds4spec: interrupted", file=sys.stderr)
        return 130
    except Ds4Error as err:
        print(f"ds4spec: error: {err}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:
        # The reader went away (``| head``): not an error, but nothing more may go to stdout.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="ds4spec: %(name)s: %(message)s")
        os.environ.setdefault("DS4SPEC_LLAMA_LOG", "1")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
