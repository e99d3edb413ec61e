"""Runs `ds4spec bench` with the triggers of other commits as modes of their own, beside the working tree's (a
measuring aid, not part of the product): a change to ``ds4spec/policy/triggers.py`` measured against the code before
it in one run, prompt by prompt, as the bench compares every mode. Usage, from the repository root:

    .venv/bin/python docs/bench/cpu/ab_triggers.py a545234 bench --pair f32 --mode triggers --mode triggers-a545234 ...

Each commit named before ``bench`` (comma-separated) becomes the mode ``triggers-COMMIT``: that commit's
``triggers.py`` loaded as a module of its own over the working tree's other modules (a commit whose ``triggers.py``
imports a module changed since runs with the working tree's version of it: a mix), its own drafter and its own
learning, with the costs the bench measured at load.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import ds4spec.bench.modes as modes
from ds4spec.bench.workloads import Task
from ds4spec.cli import main
from ds4spec.core.contracts import DraftPolicy
from ds4spec.policy.memory import PolicyMemory

VARIANTS: dict[str, ModuleType] = {}
LEARNING: dict[int, object] = {}  # per policy memory (a fresh one for every answer of --fresh)
KEPT: list[PolicyMemory] = []  # so that no memory's id is reused while its learning is kept
_policy = modes.ModePlan.policy


def load(commit: str) -> None:
    source = subprocess.run(["git", "show", f"{commit}:ds4spec/policy/triggers.py"], check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"triggers_{commit}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    VARIANTS[f"triggers-{commit}"] = module
    modes.MODE_SETTINGS[f"triggers-{commit}"] = dict(modes.MODE_SETTINGS["triggers"])


def policy(plan: modes.ModePlan, task: Task, fixed: bool) -> DraftPolicy:
    module = VARIANTS.get(plan.name)
    if module is None or plan.rules is None:
        return _policy(plan, task, fixed)
    memory = plan.memory
    if (learning := LEARNING.get(id(memory))) is None:
        learning = module.TriggerLearning(memory.profile)
        learning.reading = memory.learning.reading  # type: ignore[attr-defined]
        learning.model_token_seconds = memory.learning.model_token_seconds  # type: ignore[attr-defined]
        LEARNING[id(memory)] = learning
        KEPT.append(memory)
    chosen = module.TriggerPolicy(plan.rules, modes.task_language(task), plan.settings.draft_max, memory.sources,
                                  learning)
    chosen.early_launch = memory.early_launch
    return chosen  # type: ignore[no-any-return]


if __name__ == "__main__":
    for name in sys.argv[1].split(","):
        load(name)
    modes.ModePlan.policy = policy  # type: ignore[method-assign]
    sys.exit(main(sys.argv[2:]))
