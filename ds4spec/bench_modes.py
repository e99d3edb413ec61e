"""The ds4spec modes ``ds4spec bench`` compares with plain decoding: a list, one entry per mode.

A mode is the settings it changes (which drafter, triggers on or off). What follows from them is the same
code as everywhere else: ``load_drafter`` builds the drafter, ``load_rules`` the trigger rules, and with
rules the draft length comes from ``TriggerPolicy`` (learning across the bench's prompts, as an engine
learns across a session), without them from the gate. Any other mode name is a drafter for ``--draft``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from ds4spec.config import Settings
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.errors import UsageError
from ds4spec.loading import load_drafter, load_rules
from ds4spec.policy import DraftPolicy, FixedLength
from ds4spec.trigger_policy import TriggerLearning, TriggerPolicy
from ds4spec.trigger_rules import RuleBook
from ds4spec.workloads import Task

DEFAULT_MODES = ("pair", "lookup", "hybrid", "triggers")
MODE_SETTINGS: dict[str, dict[str, object]] = {
    "pair": {"draft": None, "triggers": False},  # the pair's model drafter, lengths from the gate
    "lookup": {"draft": "lookup", "triggers": False},
    "hybrid": {"draft": "hybrid", "triggers": False},
    "triggers": {"draft": None, "triggers": True},  # lookup and the pair's model, lengths from syntax events
}
_SETTING_NAMES = {f.name for f in fields(Settings)}


def mode_settings(settings: Settings, mode: str) -> Settings:
    changes = MODE_SETTINGS.get(mode, {"draft": mode, "triggers": False})
    # Only the fields this Settings has: a mode entry may name a setting that a branch does not have yet.
    return replace(settings, **{k: v for k, v in changes.items() if k in _SETTING_NAMES})  # type: ignore[arg-type]


def task_language(task: Task) -> str:
    """What the answer is written in, for trigger rules: HumanEval continues Python code; chat answers are
    markdown (code inside fences), as the engine treats them."""
    return "python" if task.text is not None else "markdown"


@dataclass(slots=True)
class ModePlan:
    """One mode, loaded: its settings, drafter and trigger rules, and what its triggers learned so far."""

    name: str
    settings: Settings
    drafter: GuardedDrafter
    rules: RuleBook | None
    learning: TriggerLearning = field(default_factory=TriggerLearning)

    def policy(self, task: Task, fixed: bool) -> DraftPolicy | None:
        """``--fixed``: always ``--draft-max``; triggers: per event; else None (the gate, fresh per prompt)."""
        if fixed:
            return FixedLength(self.settings.draft_max)
        if self.rules is not None:
            return TriggerPolicy(self.rules, task_language(task), self.settings.draft_max, self.drafter.sources,
                                 self.learning)
        return None


def load_mode(settings: Settings, mode: str) -> ModePlan:
    chosen = mode_settings(settings, mode)
    rules = load_rules(chosen)  # a broken rule file fails before the drafter loads
    drafter = load_drafter(chosen)
    if drafter is None:
        raise UsageError(f"--mode {mode!r} has no drafter to compare with plain decoding")
    return ModePlan(mode, chosen, drafter, rules)
