"""The ds4spec modes ``ds4spec bench`` compares with plain decoding: a list, one entry per mode.

A mode is the settings it changes (which drafter, triggers on or off). What follows from them is the same
code as everywhere else: ``load_drafter`` builds the drafter, ``load_rules`` the trigger rules, and with
rules the draft length comes from ``TriggerPolicy``, without them from the gate (both learning across the
bench's prompts, as an engine learns across a session). ``fixed-N`` drafts N tokens with the hybrid drafter
every cycle: a sweep of them is what triggers are measured against. Any other mode name is a drafter.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ds4spec.bench.workloads import Task
from ds4spec.core.contracts import DraftPolicy
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.engine.loading import load_drafter, load_rules
from ds4spec.engine.settings import Settings
from ds4spec.errors import UsageError
from ds4spec.policy.gate import FixedLength
from ds4spec.policy.memory import PolicyMemory
from ds4spec.policy.profile import VerifyProfile
from ds4spec.policy.rules import RuleBook

DEFAULT_MODES = ("pair", "lookup", "hybrid", "triggers")
# Plain decoding again, run as a mode: how far two runs of the same thing differ in this run (an A/A control). With
# AVX2-only kernels on a 2-core Zen 5 guest it read 0.94 to 1.14 of plain, five prompts a workload (run 83).
CONTROL = "control"
MODE_SETTINGS: dict[str, dict[str, object]] = {
    "pair": {"draft": None, "triggers": False},  # the pair's model drafter, lengths from the gate
    "lookup": {"draft": "lookup", "triggers": False},
    "hybrid": {"draft": "hybrid", "triggers": False},
    "triggers": {"draft": None, "triggers": True},  # lookup and the pair's model, lengths from syntax events
}
_SETTING_NAMES = {f.name for f in fields(Settings)}


FIXED_PREFIX = "fixed-"  # fixed-N: the hybrid drafter drafting exactly N tokens every cycle (a sweep's point)


def fixed_length(mode: str) -> int | None:
    """N for a ``fixed-N`` mode, else None."""
    if not mode.startswith(FIXED_PREFIX):
        return None
    try:
        n = int(mode[len(FIXED_PREFIX):])
    except ValueError:
        raise UsageError(f"--mode {mode!r}: a fixed length is fixed-N with N a whole number") from None
    if n < 1:
        raise UsageError(f"--mode {mode!r}: N must be at least 1")
    return n


def mode_settings(settings: Settings, mode: str) -> Settings:
    default = {"draft": "hybrid", "triggers": False} if fixed_length(mode) else {"draft": mode, "triggers": False}
    changes = MODE_SETTINGS.get(mode, default)
    # Only the fields this Settings has: a mode entry may name a setting that a branch does not have yet.
    return replace(settings, **{k: v for k, v in changes.items() if k in _SETTING_NAMES})  # type: ignore[arg-type]


def task_language(task: Task, language: str | None = None) -> str | None:
    """What the answer is written in, for trigger rules, as the engine picks it: chat answers are markdown (code
    inside fences); a text to continue is in its own language where the task says (HumanEval's Python, a prompts
    file's ``"language"``), else in ``language`` (``--language``), else none (the default rules, as ``complete``
    without ``--language``)."""
    if task.text is None:
        return "markdown"
    return task.language or language


@dataclass(slots=True)
class ModePlan:
    """One mode, loaded: its settings, drafter and trigger rules, and what its policies learned so far."""

    name: str
    settings: Settings
    drafter: GuardedDrafter
    rules: RuleBook | None
    memory: PolicyMemory
    fixed: int | None = None  # fixed-N modes

    def policy(self, task: Task, fixed: bool) -> DraftPolicy:
        """fixed-N: always N; ``--fixed``: always ``--draft-max``; else what an engine would use (triggers per
        event, or the gate), learning across the bench's prompts as an engine learns across a session."""
        if self.fixed:
            return FixedLength(self.fixed)
        if fixed:
            return FixedLength(self.settings.draft_max)
        return self.memory.policy(self.rules, task_language(task, self.settings.language), self.settings.draft_max)

    def fresh_policy(self, task: Task) -> DraftPolicy:
        """What ``policy`` would give a new engine, which has learned nothing yet (an untimed warm-up run, and every
        answer of ``--fresh``): the costs measured at load, nothing learned in use."""
        m = self.memory
        return replace(self, memory=PolicyMemory(m.profile, m.drafter_sources, m.costs)).policy(task, False)


def load_mode(settings: Settings, mode: str, profile: VerifyProfile, fixed: bool = False) -> ModePlan:
    """The mode's drafter and rules, its sources' costs measured against ``profile`` (the target is idle); the
    sources the cost check rules out are not followed, unless a fixed length (``fixed``, fixed-N) asks them."""
    chosen = mode_settings(settings, mode)
    rules = load_rules(chosen)  # a broken rule file fails before the drafter loads
    drafter = load_drafter(chosen)
    if drafter is None:
        raise UsageError(f"--mode {mode!r} has no drafter to compare with plain decoding")
    memory = PolicyMemory.measure(drafter, profile, chosen.draft_max, check=chosen.cost_check)
    length = fixed_length(mode)
    if not (fixed or length):
        drafter.follow_only(memory.sources)
    return ModePlan(mode, chosen, drafter, rules, memory, length)


def learned_costs(plan: ModePlan) -> list[dict[str, object]]:
    """Per drafter source, what the mode's policy measured over the whole bench: the plain step, what the steps after
    a draft cost beyond plain steps (``CycleCosts.aftermath``), and for each drafted length the whole cycle (that
    included) and the verify pass alone (the profile), in plain steps; the difference is what drafting, its aftermath
    and the loop added. Sources that never drafted are left out."""
    memory = plan.memory
    tables = memory.learning.costs.tables if plan.rules is not None else {"any": memory.gate_costs}
    rows: list[dict[str, object]] = []
    for source, table in tables.items():
        plain = table.plain_step()
        if plain is None or not table.drafts_measured:
            continue
        lengths = {str(k): [round(table.cost(k) / plain, 3), round(table.profile.ratio(k), 3)]
                   for k in table.measured_lengths() if k > 0}
        rows.append({"mode": plan.name, "source": source, "plain_step_ms": round(plain * 1000, 2),
                     "aftermath_steps": round(table.aftermath() / plain, 3), "cycle_and_verify_steps": lengths})
    return rows
