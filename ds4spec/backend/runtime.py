"""Process-wide llama.cpp set-up: loading the library, initialising its backend, routing its log into Python logging.

llama-cpp-python loads the llama.cpp shared library when imported, which takes time and memory that commands loading
no model (``--help``, ``--version``, ``models``) should not pay: the backend reaches it through ``llama_cpp`` below,
which imports it on first use."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

log = logging.getLogger("ds4spec.llama_cpp")


class _LlamaCpp:
    """The ``llama_cpp`` module, imported when first used; each name is then cached as a plain attribute."""

    def __getattr__(self, name: str) -> Any:
        import llama_cpp

        value = getattr(llama_cpp, name)
        setattr(self, name, value)
        return value


llama_cpp = _LlamaCpp()

_initialised = False
_log_callback: Any = None  # kept alive here: llama.cpp holds a pointer to it


def _log_text(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    # llama.cpp talks a lot on load; users see it only with DS4SPEC_LLAMA_LOG=1 or -v.
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", text.decode("utf-8", errors="replace").rstrip("\n"))


_stop_loading = threading.Event()  # Ctrl-C came while the main thread was inside llama.cpp's load


def _loading_goes_on(progress: float, user_data: ctypes.c_void_p) -> bool:
    return not _stop_loading.is_set()


_progress_callback: Any = None  # kept alive here, as the log callback is


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    _stop_loading.set()


@contextmanager
def interruptible_load(params: Any | None) -> Iterator[None]:
    """Makes Ctrl-C stop llama.cpp's model load in ``params`` (``llama_model_params``) at its next tensor, raising
    ``KeyboardInterrupt`` once the load call has returned. Python's own handler cannot do that: the main thread's
    only Python code during a load is the log callback, where the ``KeyboardInterrupt`` landed, was printed as
    "Exception ignored on calling ctypes callback function" and dropped, and the load went on. With ``params`` None
    (a context's creation, which logs as much and has no progress callback) the call runs to its end and the
    interrupt is raised after it: it was lost there too, and ``complete`` wrote its whole answer (exit 0, run 83).
    Off the main thread, or where SIGINT has another handler than Python's default (a server's), nothing changes."""
    global _progress_callback
    if threading.current_thread() is not threading.main_thread() or (
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    if _progress_callback is None:
        _progress_callback = llama_cpp.llama_progress_callback(_loading_goes_on)
    if params is not None:
        params.progress_callback = _progress_callback
    _stop_loading.clear()
    signal.signal(signal.SIGINT, _on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if _stop_loading.is_set():
        raise KeyboardInterrupt


def init_llama() -> None:
    global _initialised, _log_callback
    if _initialised:
        return
    _log_callback = llama_cpp.llama_log_callback(_log_text)
    llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
    if os.environ.get("DS4SPEC_LLAMA_LOG"):
        log.setLevel(logging.DEBUG)
        if not log.handlers:
            log.addHandler(logging.StreamHandler())
    llama_cpp.llama_backend_init()
    _initialised = True


def gpu_offload_supported() -> bool:
    init_llama()
    return bool(llama_cpp.llama_supports_gpu_offload())


def available_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_threads() -> int:
    """All available cores on small machines; half of them on large ones, where SMT siblings share units."""
    n = available_cores()
    return n if n <= 4 else n // 2


def system_info() -> str:
    init_llama()
    return llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()


def compiled_backends() -> list[tuple[str, int]]:
    """The ggml backends this build has, each with the devices it found: a CUDA build on a machine without a
    GPU or driver has the CUDA backend with no device, and then offloads nothing."""
    init_llama()
    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    found = [p for p in (lib_dir / name for name in ("libggml.so", "libggml.dylib", "ggml.dll")) if p.exists()]
    if not found:
        return []
    ggml = ctypes.CDLL(str(found[0]))  # already loaded with llama.cpp: the same library, not a second copy
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    ggml.ggml_backend_reg_get.restype = ctypes.c_void_p
    ggml.ggml_backend_reg_get.argtypes = [ctypes.c_size_t]
    ggml.ggml_backend_reg_name.restype = ctypes.c_char_p
    ggml.ggml_backend_reg_name.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_reg_dev_count.restype = ctypes.c_size_t
    ggml.ggml_backend_reg_dev_count.argtypes = [ctypes.c_void_p]
    backends = []
    for i in range(ggml.ggml_backend_reg_count()):
        reg = ggml.ggml_backend_reg_get(i)
        backends.append((ggml.ggml_backend_reg_name(reg).decode(), int(ggml.ggml_backend_reg_dev_count(reg))))
    return backends
