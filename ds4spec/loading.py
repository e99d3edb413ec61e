"""From settings to a loaded target model, with one-line errors for every way that can fail."""

from __future__ import annotations

from ds4spec.config import Settings
from ds4spec.errors import UsageError
from ds4spec.store import load_pairs, resolve_model
from ds4spec.target import LlamaTarget

DEFAULT_PAIR = "default"


def target_name(settings: Settings) -> str:
    if settings.target:
        return settings.target
    return load_pairs()[DEFAULT_PAIR].target


def load_target(settings: Settings) -> LlamaTarget:
    if settings.ctx < 16:
        raise UsageError(f"--ctx must be at least 16 tokens, got {settings.ctx}")
    if settings.batch < 1:
        raise UsageError(f"--batch must be at least 1, got {settings.batch}")
    resolved = resolve_model(target_name(settings))
    return LlamaTarget(resolved.path, settings.target_options())
