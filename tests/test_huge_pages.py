"""The ``ds4spec`` command restarts itself once so that glibc asks for transparent huge pages where the kernel gives
them only on request; the systems the bench compares with get the environment as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ds4spec.backend.huge_pages import (
    BEFORE,
    OPT_OUT,
    TUNABLE,
    environment_as_started,
    environment_with_huge_pages,
    glibc_version,
    thp_mode,
)

GLIBC = (2, 36)


@pytest.mark.parametrize(("text", "mode"), [("always [madvise] never\n", "madvise"),
                                            ("[always] madvise never\n", "always"),
                                            ("always madvise [never]\n", "never"), ("", None)],
                         ids=["madvise", "always", "never", "empty"])
def test_the_kernel_s_mode_is_the_bracketed_word(tmp_path: Path, text: str, mode: str | None) -> None:
    path = tmp_path / "enabled"
    path.write_text(text)
    assert thp_mode(path) == mode


def test_a_kernel_without_transparent_huge_pages_has_no_mode(tmp_path: Path) -> None:
    assert thp_mode(tmp_path / "missing") is None


def test_in_madvise_mode_the_tunable_is_added_and_what_was_there_remembered() -> None:
    env = environment_with_huge_pages({"PATH": "/bin"}, "madvise", GLIBC)
    assert env == {"PATH": "/bin", "GLIBC_TUNABLES": f"{TUNABLE}=1", BEFORE: ""}
    env = environment_with_huge_pages({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, "madvise", GLIBC)
    assert env is not None and env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{TUNABLE}=1"
    assert env[BEFORE] == "glibc.malloc.arena_max=2"


@pytest.mark.parametrize(("env", "mode", "glibc"), [
    ({}, "always", GLIBC),
    ({}, "never", GLIBC),
    ({}, None, GLIBC),
    ({}, "madvise", (2, 34)),
    ({}, "madvise", None),
    ({OPT_OUT: "0"}, "madvise", GLIBC),
    ({"GLIBC_TUNABLES": f"{TUNABLE}=0"}, "madvise", GLIBC),
    ({"GLIBC_TUNABLES": f"{TUNABLE}=1", BEFORE: ""}, "madvise", GLIBC),
], ids=["always", "never", "no-thp", "old-glibc", "not-glibc", "opted-out", "users-own-setting", "restarted"])
def test_no_restart_where_nothing_is_gained_or_the_user_decided(
    env: dict[str, str], mode: str | None, glibc: tuple[int, int] | None
) -> None:
    assert environment_with_huge_pages(env, mode, glibc) is None


def test_other_programs_get_the_environment_as_it_was_before_the_restart() -> None:
    for before in ("", "glibc.malloc.arena_max=2"):
        env = environment_with_huge_pages({"PATH": "/bin", **({"GLIBC_TUNABLES": before} if before else {})},
                                          "madvise", GLIBC)
        assert env is not None
        assert environment_as_started(env) == {"PATH": "/bin", **({"GLIBC_TUNABLES": before} if before else {})}
    assert environment_as_started({"GLIBC_TUNABLES": f"{TUNABLE}=0"}) == {"GLIBC_TUNABLES": f"{TUNABLE}=0"}


# A process that restarts itself the way the command does, then reports its tunables and, after taking 64 MB from
# the allocator and touching it, how much of its memory is on huge pages.
PROBE = """
import os
from ds4spec.backend.huge_pages import restart_with_huge_pages
restart_with_huge_pages()
block = bytearray(64 << 20)
block[::4096] = b"x" * (len(block) // 4096)
try:
    huge = [line.split()[1] for line in open("/proc/self/smaps_rollup") if line.startswith("AnonHugePages:")]
except OSError:  # no /proc: not Linux
    huge = []
print(os.environ.get("GLIBC_TUNABLES", ""), int(huge[0]) * 1024 if huge else 0, sep="|")
"""


def _probe(**env: str) -> tuple[str, int]:
    """Runs PROBE from this environment less what would decide for it (a shell's own tunables), plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", BEFORE, OPT_OUT)}
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True,
                          env={**base, **env})
    tunables, huge = proc.stdout.strip().split("|")
    return tunables, int(huge)


def _restarts_here() -> bool:
    return sys.platform.startswith("linux") and thp_mode() == "madvise" and (glibc_version() or (0, 0)) >= (2, 35)


def test_the_command_restarts_once_with_the_tunable_where_the_kernel_asks_for_it() -> None:
    tunables, _ = _probe()
    assert (tunables == f"{TUNABLE}=1") == _restarts_here()


def test_opting_out_or_setting_the_tunable_oneself_keeps_the_process_as_started() -> None:
    assert _probe(**{OPT_OUT: "0"})[0] == ""
    assert _probe(GLIBC_TUNABLES=f"{TUNABLE}=0")[0] == f"{TUNABLE}=0"


@pytest.mark.skipif(not _restarts_here(), reason="the kernel gives huge pages without asking, or never, or no glibc")
def test_after_the_restart_the_allocator_s_memory_is_on_huge_pages() -> None:
    assert _probe()[1] >= 2 << 20
    assert _probe(**{OPT_OUT: "0"})[1] < 2 << 20
