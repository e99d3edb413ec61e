"""`ds4spec bench --fresh` times every answer as a `ds4spec complete` writes it, one prompt a process: its policy
starts from the costs measured at load and nothing learned in use. Without it the policies learn across the bench's
prompts, as an engine does across a session (a chat, the editor server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4spec.bench.command import Report, _print, _Sitting
from ds4spec.bench.workloads import load_tasks
from ds4spec.engine.settings import Settings


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "learning"])
def test_fresh_answers_teach_the_mode_nothing_and_the_report_says_which(tiny_models: dict[str, Path],
                                                                        fresh: bool) -> None:
    settings = Settings(target=str(tiny_models["bpe"]), ctx=1024, gpu_layers=0, warmup=0, max_tokens=12)
    report = Report(settings={"fresh": fresh})
    sitting = _Sitting(settings, report, fresh=fresh)
    sitting.run(["lookup"], [load_tasks("humaneval", 2)], None)
    memory = sitting.plans["lookup"].memory
    # A timed answer's plain steps are the yardstick every policy learns first.
    assert (memory.gate_costs.plain_step() is None) == fresh
    assert [row["mode"] for row in report.rows] == ["plain", "lookup"]
    assert all(row["tokens"] > 0 for row in report.rows)


def test_the_printed_report_says_its_answers_were_fresh(tiny_models: dict[str, Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(target=str(tiny_models["bpe"]), ctx=1024, gpu_layers=0, warmup=0, max_tokens=4)
    for fresh in (True, False):
        report = Report(settings={"fresh": fresh, "max_tokens": 4, "prompts_per_workload": {"prose": 1}, "skip": 0})
        _Sitting(settings, report, fresh=fresh).run(["lookup"], [load_tasks("prose", 1)], None)
        _print(report)
        said = "every answer's policy fresh, as one `ds4spec complete` a prompt" in capsys.readouterr().out
        assert said == fresh
