"""Where a model's weights live on a CPU: in the GGUF file's mapping, or read into the process's own memory.

llama.cpp maps the file and computes from the mapping, except for the tensors it repacks for the CPU's kernels, which
it copies into memory from the allocator. The mapping's pages belong to the page cache: 4 KB pages that no huge-page
setting reaches. Read into the process's own memory instead, with huge pages asked for (``huge_pages``), every weight
lands on 2 MB pages. Measured on a 2-core Intel guest with nested paging (run 74, greedy plain step, huge pages asked):
the F16 target 144 ms read against 163 mapped, the default Q4_K_M target 55.9 against 58.0 (its Q6_K tensors, the
output matrix among them, are not repacked). The price is the load, whose pages are touched then instead of by the
first steps: 3.6 to 7.1 s against 0.3 for the F16 file's 3.6 GB, 1.4 to 2.3 against 0.6 for the Q4_K_M one; and memory
that the kernel cannot drop and read back from the file, which no second process shares.

So the weights are read where that pays and is safe (``reads_weights``): every layer on the CPU (a GPU holds its own
copy), the process's memory on huge pages, and the file no larger than half the memory available. ``--mmap`` and
``--no-mmap`` (``Settings.mmap``) decide instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from ds4spec.backend.huge_pages import anonymous_huge_pages, thp_mode

MEMINFO = Path("/proc/meminfo")


def memory_available(path: Path = MEMINFO) -> int | None:
    """Bytes the kernel can give without swapping (``MemAvailable``), None where it does not say."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def reads_weights(mmap: bool | None, *, n_gpu_layers: int, file_size: int, available: int | None,
                  huge_pages: bool) -> bool:
    """Whether a model is read into memory rather than computed from its file's mapping. ``mmap``: the user's choice
    (None: ds4spec's); ``huge_pages``: whether this process's memory lands on huge pages
    (``huge_pages.anonymous_huge_pages``)."""
    if mmap is not None:
        return not mmap
    return n_gpu_layers == 0 and huge_pages and available is not None and file_size <= available // 2


def reads_model_weights(mmap: bool | None, n_gpu_layers: int, path: Path) -> bool:
    """``reads_weights`` for the model file at ``path`` in this process, on this machine now."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # llama.cpp says what is wrong with the path
    return reads_weights(mmap, n_gpu_layers=n_gpu_layers, file_size=size, available=memory_available(),
                         huge_pages=anonymous_huge_pages(os.environ, thp_mode()))
