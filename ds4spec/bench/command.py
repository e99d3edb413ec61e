"""``ds4spec bench``: plain decoding against each drafter mode, same prompts, same run, greedy.

Per workload and mode it reports tokens/s, speedup over plain, acceptance, mean accepted length per verify
pass, the share of time spent drafting and verifying, and whether every output was identical to plain.
Runs are interleaved (plain, then each mode, prompt by prompt, the order reversed every other prompt and turned by
one mode every two) so that drift in machine speed, and whatever makes a prompt's first run slower, hit all modes
alike. ``--peers`` runs other systems on the same target file and prompts (``ds4spec.bench.peers``), between
ds4spec's own runs of each prompt unless ``--peers-apart``, and adds a cross-system table; ``--plot DIR`` draws
charts of the whole report (``ds4spec.bench.plots``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from collections import Counter
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ds4spec import __version__
from ds4spec.backend.target import LlamaTarget
from ds4spec.bench.ballast import AUTO_BALLAST_MIB, Ballast, auto_ballast_mib
from ds4spec.bench.divergence import first_divergence
from ds4spec.bench.modes import CONTROL, DEFAULT_MODES, ModePlan, learned_costs, load_mode
from ds4spec.bench.peer_plan import PeerPlan
from ds4spec.bench.peer_runs import PeerSitting, SystemRuns
from ds4spec.bench.peers import PEER_KEYS, BenchTask, parse_peers
from ds4spec.bench.spread import format_interval
from ds4spec.bench.systems import DS4SPEC_PLAIN, peer_records, print_systems, result_of, speedup_range, system_rows
from ds4spec.bench.workloads import WORKLOADS, Task, first_repeat, load_prompt_file, load_tasks
from ds4spec.core.events import CycleReport, Event, Finished
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import SamplingSettings
from ds4spec.core.speculative import generate_speculative
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.loading import check_settings, load_target, spec_settings
from ds4spec.engine.options import add_model_options, add_speculation_options, settings_from_args
from ds4spec.engine.settings import Settings
from ds4spec.errors import UsageError
from ds4spec.policy.profile import profile_for

SHIPPED_LIMIT = 5  # prompts of each shipped workload when --limit is not given


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench",
        help="measure speculative decoding against plain decoding",
        description="Runs the benchmark workloads (code generation, edits, edits of files in the conversation, "
        "prose) through plain decoding and each drafter mode, greedy, in one run, and prints speed, acceptance "
        "and identity with plain output.",
    )
    add_model_options(p)
    add_speculation_options(p)
    g = p.add_argument_group("benchmark")
    g.add_argument("--workload", action="append", choices=WORKLOADS, help="a workload to run (repeatable; "
                   "default: all four, or none where --prompts is given)")
    g.add_argument("--prompts", action="append", type=Path, metavar="FILE", help="a workload of your own prompts, "
                   "named after the file: one JSON object a line, {\"prompt\": ...} for a chat turn or {\"text\": "
                   "...} for text to continue, with optional \"id\" and \"stop\" (repeatable; without --workload, "
                   "only these run)")
    g.add_argument("--limit", type=int, metavar="N", help="prompts per workload (default: 5 of a shipped workload, "
                   "all of a prompts file)")
    g.add_argument("--skip", type=int, default=0, metavar="N", help="leave out each workload's first N prompts, e.g. "
                   "to check on prompts that tuning never saw (default 0)")
    g.add_argument("--max-tokens", type=int, default=128, metavar="N", help="tokens per answer (default 128)")
    g.add_argument("--repeat", type=int, default=1, metavar="N", help="run each prompt N times, plain, every mode "
                   "and every peer each time, the modes' order reversed from run to run and turned every two runs; the "
                   "figures are over all runs (default 1). On a machine whose speed drifts from minute to minute, a "
                   "speedup measured over more runs spreads less")
    g.add_argument("--fresh", action="store_true", help="start every answer's policy from nothing learned, as each "
                   "`ds4spec complete` does (one prompt a process); by default the policies learn across the "
                   "bench's prompts, as an engine does across a session")
    g.add_argument("--mode", action="append", metavar="DRAFT", help="a drafter mode to compare with plain: "
                   "pair (the pair's model drafter), lookup, hybrid, triggers (lengths and drafters chosen by "
                   "syntax events), a model name or path, or control (plain decoding again, interleaved as a mode: "
                   "how far two runs of the same thing differ in this run) (repeatable; default: --draft if given, "
                   "else pair, lookup, hybrid and triggers)")
    g.add_argument("--fixed", dest="draft_fixed", action="store_const", const=True, help="the same as "
                   "--draft-fixed: draft exactly --draft-max tokens every cycle instead of letting the policies choose")
    g.add_argument("--sweep", metavar="N,N,...", help="add fixed-N modes (the hybrid drafter drafting exactly N "
                   "tokens every cycle), e.g. 1,2,4,8: what triggers are compared with")
    g.add_argument("--out", type=Path, metavar="FILE", help="also write the results as JSON to FILE")
    g.add_argument("--peers", metavar="LIST", help="also run other systems on the same target file and prompts: "
                   f"all, or a comma-separated list of {', '.join(PEER_KEYS)} (llama: llama.cpp plain decoding, "
                   "always run as the baseline; lookup: llama-cpp-python's prompt lookup decoding; hf: "
                   "transformers, plain and assisted by the pair's drafter; llama-server: llama.cpp's own server, "
                   "built once from the same llama.cpp, plain and with --spec-type ngram-simple, ngram-mod, "
                   "ngram-map-k and draft-simple; llama-server:TYPE adds another --spec-type)")
    g.add_argument("--peers-apart", action="store_true", help="run the peers after ds4spec's own runs, one group "
                   "at a time, instead of between them prompt by prompt: less memory (one set of models loaded at "
                   "a time), but machine drift between the two halves lands on one side of the comparison")
    g.add_argument("--peer-draft", metavar="MODEL", help="the drafter of llama-server's draft modes, a model "
                   "name or GGUF path with the target's vocabulary (default: the smallest pulled model that "
                   "has it, such as qwen2.5-coder-0.5b for a Qwen target)")
    g.add_argument("--ballast", type=int, metavar="MIB", help="take and touch MIB of memory before loading any "
                   "model, given back once every system is loaded: where memory an exited process freed is slower "
                   "when taken again (measured on Firecracker guests), a system loaded first on 4 KB pages would "
                   "otherwise decode slower than those loaded after it (default with --peers: "
                   f"{AUTO_BALLAST_MIB} MiB, at most a quarter of the memory available; else 0; see "
                   "docs/benchmarks.md)")
    g.add_argument("--plot", type=Path, metavar="DIR", help="write PNG charts of the results into DIR")
    p.set_defaults(func=run)


@dataclass(slots=True)
class Tally:
    """The sums one (workload, mode) row of the report is computed from."""

    total: GenerationStats = field(default_factory=GenerationStats)  # every run's statistics, added up
    identical: int = 0
    near_ties: int = 0  # answers that differ from plain where the target's two best tokens were a near-tie
    runs: int = 0
    loop_medians: list[float] = field(default_factory=list)  # each run's median cycle
    accepted_lengths: Counter[int] = field(default_factory=Counter)  # verify passes with a draft, by accepted

    def add_cycles(self, cycles: list[CycleReport]) -> None:
        for c in cycles:
            if c.drafted:
                self.accepted_lengths[c.accepted] += 1

    def drafts_by_event(self) -> dict[str, dict[str, int]]:
        """Verify passes with a draft, drafted and accepted tokens per trigger event, for the charts; a mode
        without triggers has one event, ""."""
        t = self.total
        if not t.events:
            return {"": {"passes": t.verify_passes_with_draft, "drafted": t.drafted_tokens,
                         "accepted": t.accepted_tokens}}
        return {name: {"passes": c.verify_passes_with_draft, "drafted": c.drafted_tokens, "accepted": c.accepted_tokens}
                for name, c in t.events.items()}

    def add(self, finished: Finished, identical: bool) -> None:
        self.total.add(finished.stats)
        self.identical += identical
        self.runs += 1
        if finished.stats.loop_median_seconds:
            self.loop_medians.append(finished.stats.loop_median_seconds)

    def row(self, plain_rate: float) -> dict[str, float | int | bool]:
        t = self.total
        seconds = t.generation_seconds
        rate = t.tokens_per_second
        return {
            "tokens": t.committed_tokens,
            "seconds": round(seconds, 3),
            "tokens_per_second": round(rate, 2),
            "speedup": round(rate / plain_rate, 3) if plain_rate else 0.0,
            "acceptance": round(t.acceptance_rate, 3),
            "mean_accepted_length": round(t.mean_accepted_length, 2),
            "draft_share": round(t.draft_seconds / seconds, 3) if seconds else 0.0,
            "verify_share": round(t.verify_seconds / seconds, 3) if seconds else 0.0,
            "identical": self.identical,
            "near_ties": self.near_ties,
            "runs": self.runs,
            "all_identical": self.identical == self.runs,
            "drafter_failures": t.drafter_failures,
            "loop_ms_mean": round(1000 * t.loop_seconds / t.target_forward_passes, 3) if t.target_forward_passes
            else 0.0,
            "loop_ms_median": round(1000 * statistics.median(self.loop_medians), 3) if self.loop_medians else 0.0,
            "events": {name: {"cycles": c.cycles, "passes": c.verify_passes_with_draft, "drafted": c.drafted_tokens,
                              "accepted": c.accepted_tokens}
                       for name, c in sorted(t.events.items(), key=lambda kv: -kv[1].cycles)},
        }


@dataclass(slots=True)
class Report:
    settings: dict[str, object]
    rows: list[dict[str, object]] = field(default_factory=list)
    runs: list[dict[str, object]] = field(default_factory=list)
    cycles: list[dict[str, object]] = field(default_factory=list)  # per workload and mode, for the charts
    systems: list[dict[str, object]] = field(default_factory=list)  # with --peers: one row per system
    peer_runs: list[dict[str, object]] = field(default_factory=list)  # with --peers: one record per peer's run
    costs: list[dict[str, object]] = field(default_factory=list)  # per mode and source: what the policy learned


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    settings = replace(settings, max_tokens=args.max_tokens, temperature=0.0, stop=())
    check_settings(settings)
    if args.ballast is not None and args.ballast < 0:
        raise UsageError(f"--ballast must be at least 0 MiB, got {args.ballast}")
    if args.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {args.repeat}")
    workloads = args.workload or ([] if args.prompts else list(WORKLOADS))
    modes = args.mode or ([args.draft] if args.draft else list(DEFAULT_MODES))
    if args.sweep:
        modes = [*modes, *_sweep_modes(args.sweep)]
    peer_keys = parse_peers(args.peers) if args.peers else ()  # a bad list fails before any model loads
    shipped_limit = SHIPPED_LIMIT if args.limit is None else args.limit
    tasks = [load_tasks(workload, shipped_limit, skip=args.skip) for workload in workloads]  # so does a bad selection
    tasks += [load_prompt_file(path, args.limit, skip=args.skip) for path in args.prompts or ()]
    workloads = [t[0].workload for t in tasks]
    if (repeated := first_repeat(workloads)) is not None:
        raise UsageError(f"two workloads are named {repeated!r}: rename a prompts file")
    ballast = args.ballast if args.ballast is not None else auto_ballast_mib() if peer_keys else 0
    report = Report(settings={
        "version": __version__, "machine": platform.machine(), "python": platform.python_version(),
        "pair": settings.pair, "workloads": workloads, "modes": modes, "limit": shipped_limit, "skip": args.skip,
        "prompts_per_workload": {t[0].workload: len(t) for t in tasks},
        "prompts": [str(path) for path in args.prompts or ()],
        "max_tokens": args.max_tokens, "draft_max": settings.draft_max, "fixed": settings.draft_fixed,
        "fresh": args.fresh, "peers": list(peer_keys), "ballast_mib": ballast, "repeat": args.repeat,
    })
    peers = PeerPlan(settings, peer_keys, args.peer_draft) if peer_keys else None
    sitting = _Sitting(settings, report, fresh=args.fresh, ballast=ballast, repeat=args.repeat)
    target_path = sitting.run(modes, tasks, None if args.peers_apart else peers)
    _print(report)
    if peers:
        records = sitting.peers.records if sitting.peers else peers.apart(target_path, sitting.timed)
        report.settings["peers_interleaved"] = sitting.peers is not None
        report.systems = system_rows([*sitting.systems.values(), *records], workloads)
        report.peer_runs = peer_records(records)
        print()
        print_systems(report.systems)
    _write(report, args.out, args.plot)
    return 0


def _write(report: Report, out: Path | None, plot: Path | None) -> None:
    data = json.loads(json.dumps(asdict(report)))  # the JSON form: what --out holds and the charts read
    if out:
        out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(f"ds4spec: results written to {out}", file=sys.stderr)
    if plot:
        from ds4spec.bench.plots import write_plots  # matplotlib loads only when charts are asked for

        paths = write_plots(data, plot)
        print(f"ds4spec: {len(paths)} charts written to {plot}", file=sys.stderr)


class _Sitting:
    """ds4spec's own runs: one target, every mode's drafter and policy, each prompt run plain and then in each
    mode, and then by each peer when they run interleaved, every other prompt all the other way round. It fills the
    report, and keeps what the peers run after it need (the prompts, ds4spec's results)."""

    def __init__(self, settings: Settings, report: Report, *, fresh: bool = False, ballast: int = 0,
                 repeat: int = 1) -> None:
        self.settings = settings
        self.report = report
        self.fresh = fresh  # every answer's policy from nothing learned (``--fresh``)
        self.ballast = ballast  # MiB held while the systems load (``--ballast``)
        self.repeat = repeat  # runs of each prompt (``--repeat``)
        self.plans: dict[str, ModePlan] = {}
        self.control = False  # plain decoding again as a mode (``CONTROL``)
        self.systems: dict[str, SystemRuns] = {}  # ds4spec plain and each mode, run by run, for the peers' table
        self.tasks: list[BenchTask] = []  # every prompt, as the peers get it
        self.timed: list[BenchTask] = []  # every run of a prompt, named as the report names it (``run_label``)
        self.peers: PeerSitting | None = None  # the peers run between ds4spec's runs, when interleaved

    def run(self, modes: list[str], workloads: list[list[Task]], peers: PeerPlan | None) -> Path:
        """Runs every task plain and in every mode (and by every peer, when given); returns the target's file."""
        report = self.report
        with ExitStack() as stack:  # closed before any peer runs apart: one set of models in memory at a time
            ballast = Ballast(self.ballast)
            target = load_target(self.settings)
            stack.callback(target.close)
            profile = profile_for(target)
            report.settings["verify_profile"] = {str(n): round(profile.ratio(n - 1), 3) for n in sorted(profile.spans)}
            self.control = CONTROL in modes
            for mode in (m for m in modes if m != CONTROL):
                self.plans[mode] = load_mode(self.settings, mode, profile, self.settings.draft_fixed)
                stack.callback(self.plans[mode].drafter.close)
            report.settings["target"] = target.name
            report.settings["target_file"] = str(target.path)
            report.settings["gpu_layers"] = target.n_gpu_layers
            report.settings["weights_read"] = target.weights_read
            report.settings["drafters"] = {m: p.drafter.name for m, p in self.plans.items()}
            report.settings["source_costs"] = {
                m: {c.source: {"ms_per_token": round(c.seconds_per_token * 1000, 2),
                               "plain_steps": round(c.seconds_per_token / profile.spans[1], 3), "asked": c.affordable}
                    for c in p.memory.costs if c.seconds_per_token is not None}
                for m, p in self.plans.items()}
            self.tasks = [_bench_task(target, task) for tasks in workloads for task in tasks]
            if peers:
                self.peers = stack.enter_context(peers.interleaved(target.path, self.tasks[:1]))
            ballast.release()
            warm_up(target, self.plans.values(), workloads[0][0] if workloads and workloads[0] else None)
            prompts = iter(self.tasks)
            for tasks in workloads:
                self._workload(target, [(task, next(prompts)) for task in tasks])
            report.costs = [row for plan in self.plans.values() for row in learned_costs(plan)]
            return target.path

    def _workload(self, target: LlamaTarget, tasks: list[tuple[Task, BenchTask]]) -> None:
        workload = tasks[0][0].workload if tasks else "?"
        tallies = {m: Tally() for m in ("plain", *self._compared())}
        for mode in tallies:
            self.systems.setdefault(mode, SystemRuns(f"ds4spec {mode}", "ds4spec", DS4SPEC_PLAIN))
        for i, (task, prompt) in enumerate(tasks):
            for run in range(self.repeat):
                label = run_label(task.task_id, run)
                turn, odd = divmod(i * self.repeat + run, 2)
                reverse = odd == 1
                self.timed.append(replace(prompt, task_id=label))
                # The peers' runs reverse with ds4spec's (``_task``): the in-process llama.cpp plain run, always
                # after ds4spec's modes, ran 9 to 11% ahead of ds4spec plain on the f32 pair's code in runs 75 and
                # 78, where ds4spec plain and llama-server plain, interleaved alone, were level (0.993, run 78).
                if self.peers and reverse:
                    self.peers.run(self.timed[-1], reverse=True)
                self._task(target, task, prompt, tallies, reverse=reverse, turn=turn, label=label)
                print(f"ds4spec: bench {workload} {label} done", file=sys.stderr, flush=True)
                if self.peers and not reverse:
                    self.peers.run(self.timed[-1])
        plain_rate = tallies["plain"].row(0.0)["tokens_per_second"]
        for mode, tally in tallies.items():
            row: dict[str, object] = {"workload": workload, "mode": mode, **tally.row(float(plain_rate))}
            self.report.rows.append(row)
            if mode != "plain":
                runs = {k: r for k, r in self.systems[mode].results.items() if k[0] == workload}
                row["speedup_interval"] = speedup_range(runs, self.systems["plain"])
                self.report.cycles.append({"workload": workload, "mode": mode, "events": tally.drafts_by_event(),
                                           "accepted_lengths": dict(sorted(tally.accepted_lengths.items()))})

    def _compared(self) -> list[str]:
        """The modes compared with plain, in the order of the first prompt's runs."""
        return [*([CONTROL] if self.control else []), *self.plans]

    def _task(self, target: LlamaTarget, task: Task, prompt: BenchTask, tallies: dict[str, Tally],
              reverse: bool, turn: int, label: str) -> None:
        request = GenerationRequest(list(prompt.prompt), self.settings.max_tokens, SamplingSettings(), task.stop)
        key = (task.workload, label)
        # Of two runs of one prompt, the second was measured 2.7% faster (on the AVX2 machine): every other
        # prompt (and run of a prompt) runs its modes in reverse order, and every two the order turns by one mode,
        # so that each mode runs first, and last, as often as any other (reversed alone, a third mode ran neither
        # first nor last on any prompt). Three modes take all six orders in six prompts.
        order = ["plain", *self._compared()]
        order = order[turn % len(order):] + order[: turn % len(order)]
        if reverse:
            order.reverse()
        results: dict[str, list[Event]] = {}
        for mode in order:
            # Every run reads its whole prompt afresh: a context kept from the run before would be reused up to
            # the prompt's last token, read alone instead of inside the batch, and flip near-ties (on prose, 3 of
            # 5 answers of a mode that never drafted differed from plain that way).
            target.reset()
            if mode in ("plain", CONTROL):
                results[mode] = list(generate_plain(target, request))
            else:
                plan = self.plans[mode]
                policy = (plan.fresh_policy(task) if self.fresh and not self.settings.draft_fixed
                          else plan.policy(task, self.settings.draft_fixed))
                results[mode] = list(generate_speculative(target, plan.drafter, request, task.draft_context(),
                                                          spec_settings(plan.settings), policy=policy))
        plain = _last(results["plain"])
        tallies["plain"].add(plain, True)
        self.systems["plain"].results[key] = result_of(plain, speculative=False)
        records = {"plain": _run_record(task.workload, label, "plain", plain, True)}
        for mode in self._compared():
            spec = _last(results[mode])
            identical = spec.tokens == plain.tokens
            tallies[mode].add(spec, identical)
            tallies[mode].add_cycles([e for e in results[mode] if isinstance(e, CycleReport)])
            self.systems[mode].results[key] = result_of(spec, speculative=mode != CONTROL)
            record = records[mode] = _run_record(task.workload, label, mode, spec, identical)
            if divergence := first_divergence(target, prompt.prompt, plain.tokens, spec.tokens):
                tallies[mode].near_ties += divergence.near_tie
                record["divergence"] = divergence.as_dict()
        self.report.runs.extend(records[mode] for mode in order)  # in the order they ran


def _bench_task(target: LlamaTarget, task: Task) -> BenchTask:
    """A prompt as every system gets it: the target's tokens, and the text or turns they were made from."""
    return BenchTask(task.workload, task.task_id, tuple(task.prompt_tokens(target)), tuple(task.stop), task.text,
                     task.messages or ())


def _prompt_counts(counts: dict[str, int]) -> str:
    if len(set(counts.values())) <= 1:
        return f"{next(iter(counts.values()), 0)} prompts per workload"
    return "prompts per workload: " + ", ".join(f"{name} {n}" for name, n in counts.items())


def _sweep_modes(text: str) -> list[str]:
    try:
        lengths = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--sweep takes whole numbers separated by commas, got {text!r}") from None
    if not lengths or min(lengths) < 1:
        raise UsageError(f"--sweep lengths must be at least 1, got {text!r}")
    return [f"fixed-{n}" for n in lengths]


WARM_UP_SPANS = (2, 4, 8, 16, 32, 64)
WARM_UP_TOKENS = 16


def warm_up(target: LlamaTarget, plans: Iterable[ModePlan], task: Task | None) -> None:
    """Untimed runs, so that the first measured run does not pay what only a process's first run pays: page faults,
    a GPU backend loading the kernels of each span length on first use, each mode's first drafter and policy calls.
    Measured on an H200, where a step takes 2 ms: the first prompt's first speculative run, whatever its mode, took
    50 to 90 ms longer than its plain run, a third of a 46-token answer's time. The modes' policies learn nothing
    from these runs."""
    prompt = target.tokenizer.tokenize(b"def main():\n")
    _last(generate_plain(target, GenerationRequest(prompt, 8)))
    base = target.n_past
    for n in WARM_UP_SPANS:
        if n <= target.n_batch and base + n <= target.n_ctx:
            target.eval_span([prompt[i % len(prompt)] for i in range(n)])
            target.rollback(base)
    if task is None:
        return
    task = warm_up_task(task)
    request = GenerationRequest(task.prompt_tokens(target), WARM_UP_TOKENS, SamplingSettings(), task.stop)
    for plan in plans:
        target.reset()
        _last(generate_speculative(target, plan.drafter, request, task.draft_context(), spec_settings(plan.settings),
                                   policy=plan.fresh_policy(task)))


WARM_UP_MARK = "# warm-up\n"


def warm_up_task(task: Task) -> Task:
    """``task`` with a line before its prompt, so that a model drafter's cache keeps nothing of the prompt after the
    warm-up: on the measured run's first prompt it read the prompt in 1 ms where it took 0.19 s before (F32 pair,
    SmolLM2), a read the first answer was not charged and the triggers learned as one of all the prompt's bytes."""
    if task.messages:
        first, *rest = task.messages
        return replace(task, messages=(replace(first, content=WARM_UP_MARK + first.content), *rest))
    return replace(task, text=WARM_UP_MARK + (task.text or ""))


def _last(events: object) -> Finished:
    finished = list(events)[-1]  # type: ignore[call-overload]
    assert isinstance(finished, Finished)
    return finished


def run_label(task_id: str, run: int) -> str:
    """How the report names a prompt's run (``--repeat``): its first as the prompt, each later one numbered."""
    return task_id if run == 0 else f"{task_id} #{run + 1}"


def _run_record(workload: str, label: str, mode: str, finished: Finished, identical: bool) -> dict[str, object]:
    return {"workload": workload, "task_id": label, "mode": mode, "finish": finished.reason.value,
            "identical_to_plain": identical, **finished.stats.as_dict()}


def _print(report: Report) -> None:
    head = f"{'workload':<10} {'mode':<8} {'tok/s':>7} {'speedup':>7} {'accept':>6} {'acc/pass':>8} " \
           f"{'draft%':>6} {'verify%':>7} {'identical':>9} {'near-ties':>9} {'95% range':>11}"
    print(head)
    print("-" * len(head))
    for r in report.rows:
        plain = r["mode"] == "plain"
        print(f"{r['workload']:<10} {r['mode']:<8} {r['tokens_per_second']:>7.2f} {r['speedup']:>6.2f}x "
              f"{'' if plain else format(r['acceptance'], '.0%'):>6} "
              f"{'' if plain else format(r['mean_accepted_length'], '.2f'):>8} "
              f"{'' if plain else format(r['draft_share'], '.0%'):>6} "
              f"{'' if plain else format(r['verify_share'], '.0%'):>7} "
              f"{'' if plain else str(r['identical']) + '/' + str(r['runs']):>9} "
              f"{'' if plain or not r['near_ties'] else r['near_ties']:>9} "
              f"{format_interval(r.get('speedup_interval')):>11}")
    if any(r.get("speedup_interval") for r in report.rows):
        print("95% range: the speedup of 95% of drawings of as many answers with replacement (a bootstrap over the "
              "answers; docs/benchmarks.md)")
    _print_mismatches(report)
    _print_events(report)
    _print_loop(report)
    _print_costs(report)
    drafters = report.settings.get("drafters", {})
    print(f"target {report.settings.get('target')}; drafters {drafters}; greedy, {report.settings['max_tokens']} "
          f"tokens, {_prompt_counts(report.settings['prompts_per_workload'])}"
          + (f", each run {repeat} times" if (repeat := report.settings.get("repeat", 1)) != 1 else "")
          + (f" after the first {skip}" if (skip := report.settings.get("skip")) else "")
          + ("; every answer's policy fresh, as one `ds4spec complete` a prompt"
             if report.settings.get("fresh") else "")
          + ("; weights read into memory" if report.settings.get("weights_read") else ""))


def _print_mismatches(report: Report) -> None:
    """Answers that differ from plain's where the target did not nearly tie: each is a defect to look into."""
    for r in report.runs:
        d = r.get("divergence")
        if isinstance(d, dict) and not d["near_tie"]:
            print(f"NOT A NEAR-TIE: {r['workload']} {r['task_id']} {r['mode']} differs from plain at token {d['at']} "
                  f"(logits {d['gap']} apart)")


def _print_loop(report: Report) -> None:
    """Speculation's own cost per cycle, outside the models: it must stay far below a GPU step (10-20 ms)."""
    rows = [r for r in report.rows if r["mode"] != "plain" and r.get("loop_ms_mean")]
    if rows:
        print()
        print("loop outside model calls, ms a cycle (median of the runs' medians / mean): " + ", ".join(
            f"{r['workload']} {r['mode']} {r['loop_ms_median']:.2f} / {r['loop_ms_mean']:.2f}" for r in rows))


def _print_costs(report: Report) -> None:
    """What a cycle costs, in plain steps: the measured verify profile, and what each mode's drafting added."""
    profile = report.settings.get("verify_profile")
    if isinstance(profile, dict):
        print()
        print("verify pass over n tokens, in plain steps: "
              + ", ".join(f"{n}: {ratio:.2f}" for n, ratio in profile.items()))
    for mode, sources in report.settings.get("source_costs", {}).items():
        for source, c in sources.items():
            verdict = "asked" if c["asked"] else "not asked: at 90% acceptance not a tenth faster than plain decoding"
            print(f"{mode:<8} {source:<6} drafts cost {c['ms_per_token']:.1f} ms a token ({c['plain_steps']:.2f} "
                  f"plain steps); {verdict}")
    for c in report.costs:
        lengths: dict[str, list[float]] = c["cycle_and_verify_steps"]  # type: ignore[assignment]
        print(f"{c['mode']:<8} {c['source']:<6} plain step {c['plain_step_ms']:.1f} ms; the steps after a draft "
              f"{c.get('aftermath_steps', 0.0):.2f} more; a cycle drafting k, with them, "
              "in plain steps (the verify pass alone): "
              + ", ".join(f"{k}: {cycle:.2f} ({verify:.2f})" for k, (cycle, verify) in lengths.items()))


def _print_events(report: Report) -> None:
    """Per trigger event: cycles begun there, drafts verified, and their acceptance."""
    rows = [r for r in report.rows if r.get("events")]
    if not rows:
        return
    print()
    print(f"{'workload':<10} {'mode':<8} {'event':<24} {'cycles':>6} {'drafts':>6} {'drafted':>7} {'accept':>6} "
          f"{'acc/pass':>8}")
    for r in rows:
        events: dict[str, dict[str, int]] = r["events"]  # type: ignore[assignment]
        for name, c in events.items():
            accept = format(c["accepted"] / c["drafted"], ".0%") if c["drafted"] else ""
            per_pass = format(c["accepted"] / c["passes"], ".2f") if c["passes"] else ""
            print(f"{r['workload']:<10} {r['mode']:<8} {name:<24} {c['cycles']:>6} {c['passes']:>6} "
                  f"{c['drafted']:>7} {accept:>6} {per_pass:>8}")
