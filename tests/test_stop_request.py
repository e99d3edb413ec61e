"""Ctrl-C while a face reads a generation: the first asks to stop, a second raises, and the old handler
comes back afterwards."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from ds4spec.stop_request import StopRequest


def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)  # Python runs the handler at its next check, on the main thread


def test_the_first_ctrl_c_only_asks_to_stop() -> None:
    with StopRequest() as stop:
        assert not stop()
        ctrl_c()
        assert stop()


def test_a_second_ctrl_c_raises() -> None:
    with pytest.raises(KeyboardInterrupt), StopRequest():
        ctrl_c()
        ctrl_c()


def test_the_previous_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    with StopRequest():
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(KeyboardInterrupt):  # outside, Ctrl-C raises at once, as Python's own handler does
        ctrl_c()


def test_off_the_main_thread_it_sets_no_handler_and_is_never_asked() -> None:
    seen: list[object] = []

    def run() -> None:
        with StopRequest() as stop:
            seen.extend([signal.getsignal(signal.SIGINT), stop()])

    before = signal.getsignal(signal.SIGINT)
    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert seen == [before, False]
