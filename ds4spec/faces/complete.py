"""``ds4spec complete``: the text on stdin in, its continuation on stdout as it is generated.

Stdout carries only the completion (or, with ``--json``, one JSON object); everything else goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import BinaryIO

from ds4spec.backend.prompt import DEFAULT_CURSOR_MARKER, split_at_cursor
from ds4spec.core.events import Event, Finished, FinishReason, TextChunk
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.context_files import with_files
from ds4spec.engine.engine import Engine
from ds4spec.engine.loading import check_settings
from ds4spec.engine.options import (
    add_model_options,
    add_sampling_options,
    add_speculation_options,
    settings_from_args,
)
from ds4spec.engine.settings import Settings
from ds4spec.errors import InputError, UsageError
from ds4spec.faces.shared.files import absolute, read_file
from ds4spec.faces.shared.stop_request import StopRequest


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "complete",
        help="continue the text on stdin",
        description="Reads text on stdin and writes its continuation to stdout as it is generated.",
    )
    add_model_options(p)
    add_speculation_options(p)
    add_sampling_options(p)
    g = p.add_argument_group("input and output")
    g.add_argument("--fim", action="store_true", help="fill in the middle: the input holds one cursor "
                   f"marker ({DEFAULT_CURSOR_MARKER}) and the model writes what goes there")
    g.add_argument("--cursor-marker", default=DEFAULT_CURSOR_MARKER, metavar="TEXT",
                   help=f"the cursor marker for --fim (default {DEFAULT_CURSOR_MARKER})")
    g.add_argument("--truncate", choices=("none", "left"), default="none", help="a prompt longer than the "
                   "context is an error (none, the default) or loses its beginning (left)")
    g.add_argument("--json", action="store_true", help="write one JSON object (text, finish reason, "
                   "statistics) instead of streaming text")
    g.add_argument("--stats", action="store_true", help="print tokens, time and tokens/s on stderr")
    g.add_argument("--context", action="append", default=[], metavar="FILE",
                   help="put FILE before the text, named and fenced as the chat shows files (repeatable): "
                   "the model and the lookup drafter see it")
    p.set_defaults(func=run)


def read_input(stream: BinaryIO) -> str:
    if stream.isatty():
        print("ds4spec: reading the text to complete from the terminal; end it with Ctrl-D", file=sys.stderr)
    data = stream.read()
    if not data:
        raise InputError("stdin is empty: pipe the text to complete, as in `ds4spec complete < file.py`")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"stdin is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from exc


@dataclass(slots=True)
class _Outcome:
    text: str
    reason: FinishReason
    stats: GenerationStats


def complete_settings(args: argparse.Namespace) -> Settings:
    """The flags' settings, the model file mapped unless ``--no-mmap`` says otherwise: one answer does not pay back
    the longer load of weights read into memory (``backend.weights_memory``; measured in run 74, 128 tokens from the
    default target: 8.0 and 9.3 s in all mapped, 9.9 and 10.4 s read)."""
    settings = settings_from_args(args)
    return replace(settings, mmap=True) if settings.mmap is None else settings


def run(args: argparse.Namespace) -> int:
    settings = complete_settings(args)
    check_settings(settings)
    context = [read_file(absolute(name)).context() for name in args.context]  # a bad file fails before loading
    text = read_input(sys.stdin.buffer)
    if args.fim:  # a missing marker is known before the models load (9 s on the default pair)
        if not args.cursor_marker:
            raise UsageError("--cursor-marker must not be empty")
        prefix, suffix = split_at_cursor(text, args.cursor_marker)
    with Engine.load(settings) as engine:
        if args.fim:
            prompt = engine.completion_prompt(with_files(context, prefix), suffix, hint="raise --ctx")
        else:
            prompt = engine.completion_prompt(with_files(context, text), keep_end=args.truncate == "left",
                                              hint="raise --ctx or pass --truncate left")
        with StopRequest() as stop:
            events = engine.generate(prompt, cancelled=stop)
            outcome = _consume(events, stream=not args.json, prompt_tokens=len(prompt.tokens))
    if args.json:
        _write_json(outcome)
    if args.stats:
        print(f"ds4spec: {outcome.stats.summary_line()}; finish: {outcome.reason.value}", file=sys.stderr)
        for line in outcome.stats.event_lines():
            print(f"ds4spec:   {line}", file=sys.stderr)
    return 130 if outcome.reason is FinishReason.CANCELLED else 0


def _consume(events: Iterator[Event], *, stream: bool, prompt_tokens: int) -> _Outcome:
    out = sys.stdout.buffer
    parts: list[str] = []
    try:
        for event in events:
            if isinstance(event, TextChunk):
                parts.append(event.text)
                if stream:
                    out.write(event.text.encode("utf-8"))
                    out.flush()
            elif isinstance(event, Finished):
                return _Outcome("".join(parts), event.reason, event.stats)
    except KeyboardInterrupt:
        # A second Ctrl-C (the first asks the engine to stop): what was written stays written.
        events.close()  # type: ignore[attr-defined]
        return _Outcome("".join(parts), FinishReason.CANCELLED, GenerationStats(prompt_tokens))
    raise RuntimeError("the generator ended without a Finished event")


def _write_json(outcome: _Outcome) -> None:
    obj = {"text": outcome.text, "finish_reason": outcome.reason.value, "stats": outcome.stats.as_dict()}
    sys.stdout.buffer.write((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))
    sys.stdout.flush()
