"""A model file derived from another on this machine: the same weights in another storage (F32, F16, Q8_0, ...),
written by llama.cpp's own quantize function (``allow_requantize``: the base may itself be quantized).

Why: the hubs that host an F16 copy are often out of reach, and the conversion takes a minute, where a
download of several GB may not. The quantize function writes a path, not a stream, so the file is written
beside the store's final file and then streamed through the store's sink, which hashes and checks it.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from pathlib import Path

from ds4spec.store.manifests import DerivedSource, Manifest
from ds4spec.store.progress import ByteProgress, ProgressListener
from ds4spec.store.sources import Sink, SourceUnavailable

POLL_S = 0.25


def quantize_file(base: Path, out: Path, quantization: str, progress: ByteProgress) -> None:
    """Writes ``base`` converted to ``quantization`` at ``out``; progress follows the output's size."""
    import llama_cpp

    from ds4spec.backend.runtime import available_cores, init_llama

    init_llama()
    params = llama_cpp.llama_model_quantize_default_params()
    ftype = "ALL_F32" if quantization == "F32" else f"MOSTLY_{quantization}"  # llama.cpp's names: no MOSTLY_F32
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_{ftype}")
    params.allow_requantize = True
    params.nthread = available_cores()
    codes: list[int] = []
    worker = threading.Thread(  # ctypes lets go of the GIL: this thread can watch the file grow meanwhile
        target=lambda: codes.append(llama_cpp.llama_model_quantize(str(base).encode(), str(out).encode(),
                                                                   ctypes.byref(params))),
        daemon=True)
    worker.start()
    written = 0
    while worker.is_alive():
        worker.join(POLL_S)
        size = out.stat().st_size if out.exists() else 0
        if size > written:
            progress.advance(size - written)
            written = size
    if codes != [0]:
        raise SourceUnavailable(f"llama.cpp could not convert {base.name} to {quantization}")


def fetch_derived(base: Path, src: DerivedSource, manifest: Manifest, sink_factory: Callable[[], Sink],
                  progress: bool, listener: ProgressListener | None) -> None:
    """Converts ``base`` (the pulled file of model ``src.base``) and streams the result into the sink."""
    out = base.with_name(f"{manifest.file}.converting")
    bar = ByteProgress(f"{manifest.name} (converting {src.base} to {src.quantization})", manifest.size, progress,
                       listener)
    try:
        try:
            quantize_file(base, out, src.quantization, bar)
        finally:
            bar.close()
        sink = sink_factory()
        with out.open("rb") as f:
            sink.copy_from(f)
    finally:
        out.unlink(missing_ok=True)
