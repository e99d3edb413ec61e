"""Ctrl-C while llama.cpp loads a model stops the load and ends the command (exit code 130), instead of landing in
llama.cpp's log callback, where Python printed "Exception ignored on calling ctypes callback function" and dropped it
while the load went on (a REPL started anyway). The signal is sent to this process, as the terminal sends it, with
Python's own SIGINT handler in place, as in a terminal (a shell's background job, as CI may run the suite, ignores
SIGINT, and then nothing is changed)."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from ds4spec.backend.runtime import init_llama, interruptible_load, llama_cpp
from ds4spec.backend.target import LlamaTarget


@pytest.fixture
def terminal_sigint() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("terminal_sigint")
def test_ctrl_c_inside_the_load_cancels_it_and_is_raised_once_the_call_returns(tiny_bpe_gguf: Path) -> None:
    init_llama()
    params = llama_cpp.llama_model_default_params()
    model = None
    with pytest.raises(KeyboardInterrupt), interruptible_load(params):
        os.kill(os.getpid(), signal.SIGINT)  # handled at once, on this thread, without raising here
        model = llama_cpp.llama_model_load_from_file(str(tiny_bpe_gguf).encode(), params)
    assert not model  # the progress callback said stop at the first tensor
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("terminal_sigint")
def test_a_load_without_ctrl_c_is_untouched_and_leaves_python_s_handler(tiny_bpe_gguf: Path) -> None:
    with LlamaTarget(tiny_bpe_gguf) as target:
        assert target.n_vocab > 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_another_sigint_handler_is_left_alone(tiny_bpe_gguf: Path) -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        init_llama()
        params = llama_cpp.llama_model_default_params()
        with interruptible_load(params):
            os.kill(os.getpid(), signal.SIGINT)
        assert seen == [signal.SIGINT] and not params.progress_callback
    finally:
        signal.signal(signal.SIGINT, previous)


class _InterruptAt(logging.Handler):
    """Sends SIGINT to this process when llama.cpp logs ``needle``: a Ctrl-C at that moment of a load, exactly."""

    def __init__(self, needle: str) -> None:
        super().__init__(logging.DEBUG)
        self.needle = needle
        self.sent = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.sent and self.needle in record.getMessage():
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.usefixtures("terminal_sigint")
def test_ctrl_c_while_the_context_is_created_ends_the_load_too(tiny_bpe_gguf: Path) -> None:
    """After the weights, llama.cpp creates the context (and logs as it does): a Ctrl-C there landed in the log
    callback and was lost, and ``complete`` went on to write its whole answer (exit 0, 114 s later, run 83)."""
    logger = logging.getLogger(runtime_log_name())
    handler, level = _InterruptAt("llama_context"), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with pytest.raises(KeyboardInterrupt):
            LlamaTarget(tiny_bpe_gguf)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert handler.sent
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def runtime_log_name() -> str:
    from ds4spec.backend import runtime

    return runtime.log.name
