"""``ds4spec bench``: plain decoding against each drafter mode, same prompts, same run, greedy.

Per workload and mode it reports tokens/s, speedup over plain, acceptance, mean accepted length per verify
pass, the share of time spent drafting and verifying, and whether every output was identical to plain.
Runs are interleaved (plain, then each mode, prompt by prompt) so that drift in machine speed hits all modes
alike.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ds4spec import __version__
from ds4spec.cli_options import add_model_options, add_speculation_options, settings_from_args
from ds4spec.config import Settings
from ds4spec.decode import GenerationRequest, generate_plain
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.errors import UsageError
from ds4spec.events import Finished
from ds4spec.loading import check_settings, load_drafter, load_target, spec_settings
from ds4spec.policy import FixedLength
from ds4spec.sampling import SamplingSettings
from ds4spec.speculative import generate_speculative
from ds4spec.target import LlamaTarget
from ds4spec.workloads import WORKLOADS, Task, load_tasks

DEFAULT_MODES = ("pair", "lookup", "hybrid")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench",
        help="measure speculative decoding against plain decoding",
        description="Runs the benchmark workloads (code generation, edits, prose) through plain decoding and "
        "each drafter mode, greedy, in one run, and prints speed, acceptance and identity with plain output.",
    )
    add_model_options(p)
    add_speculation_options(p)
    g = p.add_argument_group("benchmark")
    g.add_argument("--workload", action="append", choices=WORKLOADS, help="a workload to run (repeatable; "
                   "default: all three)")
    g.add_argument("--limit", type=int, default=5, metavar="N", help="prompts per workload (default 5)")
    g.add_argument("--max-tokens", type=int, default=128, metavar="N", help="tokens per answer (default 128)")
    g.add_argument("--mode", action="append", metavar="DRAFT", help="a drafter mode to compare with plain: "
                   "pair (the pair's model drafter), lookup, hybrid, or a model name or path (repeatable; "
                   "default: --draft if given, else pair, lookup and hybrid)")
    g.add_argument("--fixed", action="store_true", help="draft exactly --draft-max tokens every cycle "
                   "instead of letting the gate choose")
    g.add_argument("--out", type=Path, metavar="FILE", help="also write the results as JSON to FILE")
    p.set_defaults(func=run)


@dataclass(slots=True)
class Tally:
    """The sums one (workload, mode) row of the report is computed from."""

    tokens: int = 0
    seconds: float = 0.0
    drafted: int = 0
    accepted: int = 0
    passes_with_draft: int = 0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    identical: int = 0
    runs: int = 0
    failures: int = 0

    def add(self, finished: Finished, identical: bool) -> None:
        s = finished.stats
        self.tokens += s.committed_tokens
        self.seconds += s.generation_seconds
        self.drafted += s.drafted_tokens
        self.accepted += s.accepted_tokens
        self.passes_with_draft += s.verify_passes_with_draft
        self.draft_seconds += s.draft_seconds
        self.verify_seconds += s.verify_seconds
        self.identical += identical
        self.runs += 1
        self.failures += s.drafter_failures

    def row(self, plain_rate: float) -> dict[str, float | int | bool]:
        rate = self.tokens / self.seconds if self.seconds else 0.0
        return {
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "tokens_per_second": round(rate, 2),
            "speedup": round(rate / plain_rate, 3) if plain_rate else 0.0,
            "acceptance": round(self.accepted / self.drafted, 3) if self.drafted else 0.0,
            "mean_accepted_length": round(self.accepted / self.passes_with_draft, 2) if self.passes_with_draft else 0.0,
            "draft_share": round(self.draft_seconds / self.seconds, 3) if self.seconds else 0.0,
            "verify_share": round(self.verify_seconds / self.seconds, 3) if self.seconds else 0.0,
            "identical": self.identical,
            "runs": self.runs,
            "all_identical": self.identical == self.runs,
            "drafter_failures": self.failures,
        }


@dataclass(slots=True)
class Report:
    settings: dict[str, object]
    rows: list[dict[str, object]] = field(default_factory=list)
    runs: list[dict[str, object]] = field(default_factory=list)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    settings = replace(settings, max_tokens=args.max_tokens, temperature=0.0, stop=())
    check_settings(settings)
    workloads = args.workload or list(WORKLOADS)
    modes = args.mode or ([args.draft] if args.draft else list(DEFAULT_MODES))
    report = Report(settings={
        "version": __version__, "machine": platform.machine(), "python": platform.python_version(),
        "pair": settings.pair, "workloads": workloads, "modes": modes, "limit": args.limit,
        "max_tokens": args.max_tokens, "draft_max": settings.draft_max, "fixed": args.fixed,
    })
    target = load_target(settings)
    drafters: dict[str, GuardedDrafter] = {}
    try:
        for mode in modes:
            drafter = load_drafter(replace(settings, draft=None if mode == "pair" else mode))
            if drafter is None:
                raise UsageError(f"--mode {mode!r} has no drafter to compare with plain decoding")
            drafters[mode] = drafter
        report.settings["target"] = target.name
        report.settings["drafters"] = {m: d.name for m, d in drafters.items()}
        _warm_up(target)
        for workload in workloads:
            _run_workload(target, drafters, settings, load_tasks(workload, args.limit), args.fixed, report)
    finally:
        for d in drafters.values():
            d.close()
        target.close()
    _print(report)
    if args.out:
        args.out.write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
        print(f"ds4spec: results written to {args.out}", file=sys.stderr)
    return 0


def _warm_up(target: LlamaTarget) -> None:
    """One short untimed generation, so that the first measured run does not pay for page faults."""
    prompt = target.tokenizer.tokenize(b"def main():\n")
    _last(generate_plain(target, GenerationRequest(prompt, 8)))


def _last(events: object) -> Finished:
    finished = list(events)[-1]  # type: ignore[call-overload]
    assert isinstance(finished, Finished)
    return finished


def _run_workload(target: LlamaTarget, drafters: dict[str, GuardedDrafter], settings: Settings,
                  tasks: list[Task], fixed: bool, report: Report) -> None:
    workload = tasks[0].workload if tasks else "?"
    tallies = {"plain": Tally(), **{m: Tally() for m in drafters}}
    sampling = SamplingSettings()  # greedy
    for task in tasks:
        request = GenerationRequest(task.prompt_tokens(target), settings.max_tokens, sampling, task.stop)
        plain = _last(generate_plain(target, request))
        tallies["plain"].add(plain, True)
        report.runs.append(_run_record(workload, task, "plain", plain, True))
        for mode, drafter in drafters.items():
            policy = FixedLength(settings.draft_max) if fixed else None
            events: object = generate_speculative(target, drafter, request, task.draft_context(),
                                                  spec_settings(settings), policy=policy)
            spec = _last(events)
            identical = spec.tokens == plain.tokens
            tallies[mode].add(spec, identical)
            report.runs.append(_run_record(workload, task, mode, spec, identical))
        print(f"ds4spec: bench {workload} {task.task_id} done", file=sys.stderr, flush=True)
    plain_rate = tallies["plain"].row(0.0)["tokens_per_second"]
    for mode, tally in tallies.items():
        report.rows.append({"workload": workload, "mode": mode, **tally.row(float(plain_rate))})


def _run_record(workload: str, task: Task, mode: str, finished: Finished, identical: bool) -> dict[str, object]:
    return {"workload": workload, "task_id": task.task_id, "mode": mode, "finish": finished.reason.value,
            "identical_to_plain": identical, **finished.stats.as_dict()}


def _print(report: Report) -> None:
    head = f"{'workload':<10} {'mode':<8} {'tok/s':>7} {'speedup':>7} {'accept':>6} {'acc/pass':>8} " \
           f"{'draft%':>6} {'verify%':>7} {'identical':>9}"
    print(head)
    print("-" * len(head))
    for r in report.rows:
        plain = r["mode"] == "plain"
        print(f"{r['workload']:<10} {r['mode']:<8} {r['tokens_per_second']:>7.2f} {r['speedup']:>6.2f}x "
              f"{'' if plain else format(r['acceptance'], '.0%'):>6} "
              f"{'' if plain else format(r['mean_accepted_length'], '.2f'):>8} "
              f"{'' if plain else format(r['draft_share'], '.0%'):>6} "
              f"{'' if plain else format(r['verify_share'], '.0%'):>7} "
              f"{'' if plain else str(r['identical']) + '/' + str(r['runs']):>9}")
    drafters = report.settings.get("drafters", {})
    print(f"target {report.settings.get('target')}; drafters {drafters}; greedy, {report.settings['max_tokens']} "
          f"tokens, {report.settings['limit']} prompts per workload")


