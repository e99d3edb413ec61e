"""The models' memory on transparent huge pages, where the kernel gives them only to memory that asks for them.

Decoding reads every weight once a step. llama.cpp allocates its CPU buffers with the C library's allocator (the
weights repacked for the CPU's kernels, the KV cache), and a Linux kernel whose transparent huge pages are in
``madvise`` mode (Debian's and Ubuntu's default) backs them with 4 KB pages unless the memory asks for 2 MB ones: a 1 GB
model then spans 260,000 pages, and the translation misses of each step cost most where paging is nested (a virtual
machine). glibc asks for huge pages on every allocation it maps when its ``glibc.malloc.hugetlb`` tunable is 1, read
from ``GLIBC_TUNABLES`` when the process starts; so the ``ds4spec`` command restarts itself once with it set
(``restart_with_huge_pages``), before it imports anything large. Measured on a 2-core Intel guest with nested paging
(run 73): the default Q4_K_M target's plain step took 60.2 ms against 71.0, its repacked weights on 815 MB of huge
pages; the F16 target, whose weights llama.cpp reads from the file's mapping, 160 ms against 164.

``DS4SPEC_HUGE_PAGES=0`` leaves the allocator as it is; a ``GLIBC_TUNABLES`` that already names the tunable is the
user's choice and is kept. The systems ``ds4spec bench`` compares with run with the environment as it was before the
restart (``environment_as_started``): measured as their users run them.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

TUNABLE = "glibc.malloc.hugetlb"
OPT_OUT = "DS4SPEC_HUGE_PAGES"  # "0": no restart
# Set by the restart to what GLIBC_TUNABLES held before it ("" for nothing): how peers get the environment back.
BEFORE = "DS4SPEC_GLIBC_TUNABLES_BEFORE"
THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
FIRST_GLIBC = (2, 35)  # the first glibc with the tunable; older ones ignore it


def thp_mode(path: Path = THP_ENABLED) -> str | None:
    """The kernel's transparent huge page mode (``always``, ``madvise``, ``never``), None where it has none."""
    try:
        text = path.read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def glibc_version() -> tuple[int, int] | None:
    name, version = platform.libc_ver()
    if name != "glibc":
        return None
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return None
    return major, minor


def environment_with_huge_pages(env: Mapping[str, str], mode: str | None,
                                glibc: tuple[int, int] | None) -> dict[str, str] | None:
    """The environment to restart in so that glibc asks for huge pages, or None where there is nothing to gain: the
    kernel gives them without asking (``always``) or never, the C library is not glibc 2.35 or later, the user opted
    out or set the tunable, or the process already restarted."""
    if env.get(OPT_OUT) == "0" or BEFORE in env or mode != "madvise" or glibc is None or glibc < FIRST_GLIBC:
        return None
    tunables = env.get("GLIBC_TUNABLES", "")
    if TUNABLE in tunables:
        return None
    restarted = dict(env)
    restarted["GLIBC_TUNABLES"] = f"{tunables}:{TUNABLE}=1" if tunables else f"{TUNABLE}=1"
    restarted[BEFORE] = tunables
    return restarted


def restart_with_huge_pages() -> None:
    """Re-executes this process with the tunable set where that gains anything (never returns then); else returns."""
    if not sys.platform.startswith("linux"):
        return
    env = environment_with_huge_pages(os.environ, thp_mode(), glibc_version())
    if env is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def huge_pages_asked(env: Mapping[str, str]) -> bool:
    """Whether glibc in a process with this environment asks for huge pages (the tunable at 1, or 2 for a
    hugetlbfs pool)."""
    for item in env.get("GLIBC_TUNABLES", "").split(":"):
        name, _, value = item.partition("=")
        if name == TUNABLE and value.strip() not in ("", "0"):
            return True
    return False


def anonymous_huge_pages(env: Mapping[str, str], mode: str | None) -> bool:
    """Whether the memory a process with this environment allocates lands on huge pages: the kernel gives them to
    all (``always``) or to glibc asking for them (``madvise``)."""
    return mode == "always" or (mode == "madvise" and huge_pages_asked(env))


def environment_as_started(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as it was before ``restart_with_huge_pages`` set the tunable: what another program should get."""
    started = dict(env)
    if BEFORE in started:
        before = started.pop(BEFORE)
        if before:
            started["GLIBC_TUNABLES"] = before
        else:
            started.pop("GLIBC_TUNABLES", None)
    return started
