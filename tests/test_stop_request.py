"""Ctrl-C while a face reads a generation: the first asks to stop, a second raises, and the old handler
comes back afterwards."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from ds4spec.faces.shared.stop_request import StopRequest


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


@pytest.fixture
def pythons_own_handler() -> Iterator[None]:
    """What ``ds4spec`` runs under (``cli.main`` claims it); earlier tests may have left another one."""
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, saved)


def test_the_previous_handler_comes_back(pythons_own_handler: None) -> None:
    with StopRequest():
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):  # outside, Ctrl-C raises at once again
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
