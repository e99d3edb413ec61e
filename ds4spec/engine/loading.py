"""From settings to loaded models (the target, and the drafter of the pair or of ``--draft``)."""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ds4spec.backend.runtime import available_cores, default_threads, gpu_offload_supported
from ds4spec.backend.target import LlamaTarget
from ds4spec.core.speculative import SpecSettings
from ds4spec.drafters.factory import KEYWORDS, DrafterSpec, build_drafter
from ds4spec.drafters.guard import GuardedDrafter, needs_a_worker
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error, ModelError, UsageError
from ds4spec.policy.profile import fingerprint
from ds4spec.policy.rules import RuleBook, load_rulebook
from ds4spec.store.local import resolve_model
from ds4spec.store.manifests import Pair, find_pair


def check_settings(settings: Settings) -> None:
    """Usage errors that need no model: reported before anything is loaded."""
    if settings.ctx < 16:
        raise UsageError(f"--ctx must be at least 16 tokens, got {settings.ctx}")
    if settings.batch < 1:
        raise UsageError(f"--batch must be at least 1, got {settings.batch}")
    if settings.max_tokens < 1:
        raise UsageError(f"--max-tokens must be at least 1, got {settings.max_tokens}")
    if not 0 <= settings.draft_max < settings.batch:
        raise UsageError(f"--draft-max must be between 0 and {settings.batch - 1}, got {settings.draft_max}")
    if not 0 <= settings.p_min <= 1:
        raise UsageError(f"--p-min must be between 0 and 1, got {settings.p_min}")
    if settings.draft_backend not in (None, "llama", "torch"):
        raise UsageError(f"--draft-backend must be llama or torch, got {settings.draft_backend!r}")
    if settings.threads is not None and settings.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {settings.threads}")
    if settings.draft_threads is not None and settings.draft_threads < 1:
        raise UsageError(f"--draft-threads must be at least 1, got {settings.draft_threads}")
    if settings.draft_deadline <= 0:
        raise UsageError(f"--draft-deadline must be positive, got {settings.draft_deadline}")
    try:
        settings.sampling().validate()
    except ValueError as exc:
        raise UsageError(f"--{exc}") from exc  # each message begins with the setting's name


def pair_of(settings: Settings) -> Pair:
    return find_pair(settings.pair)


def target_name(settings: Settings) -> str:
    return settings.target or pair_of(settings).target


def locate_model(name_or_path: str) -> tuple[Path, str | None]:
    """The file of a model named by its manifest name or by a path, and its manifest name when it has one."""
    resolved = resolve_model(name_or_path)
    return resolved.path, resolved.manifest.name if resolved.manifest else None


def load_target(settings: Settings) -> LlamaTarget:
    resolved = resolve_model(target_name(settings))
    return LlamaTarget(resolved.path, settings.target_options())


def drafter_spec(settings: Settings) -> DrafterSpec:
    """With triggers on, the implicit drafter is hybrid: the pair's model plus lookup, so that every rule's
    drafter choice (lookup, model, hybrid) can be honoured."""
    pair = pair_of(settings)
    draft = settings.draft or ("hybrid" if settings.triggers else pair.drafter)
    # The pair's backend applies to the pair's own drafter; a drafter named on the command line runs in
    # llama.cpp unless --draft-backend says otherwise.
    pair_model = draft in (pair.drafter, "hybrid") and not settings.draft_backend
    backend = settings.draft_backend or (pair.drafter_backend if pair_model else "llama")
    return DrafterSpec(
        draft=draft,
        model=pair.drafter if draft in KEYWORDS else draft,
        backend=backend,  # type: ignore[arg-type]
        p_min=settings.p_min,
        heal=settings.heal,
        n_ctx=settings.ctx,
        threads=drafter_threads(settings),
        torch_threads=settings.draft_threads or 1,
        gpu_layers=settings.gpu_layers,
        mmap=settings.mmap,
    )


def draft_costs_key(settings: Settings, target: LlamaTarget, drafter_name: str) -> str:
    """What the timed costs of the drafter ``settings`` name depend on, for ``cached_source_costs``: its spec
    (model, backend, threads, offload), its model's file as it is now, the target and the machine
    (``fingerprint``)."""
    spec = drafter_spec(settings)
    model: tuple[object, ...] = ()
    if spec.model:
        with contextlib.suppress(Ds4Error, OSError):
            path = locate_model(spec.model)[0]
            st = path.stat()
            model = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    parts = (drafter_name, repr(spec), model, fingerprint(target))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:20]


def drafter_model(settings: Settings) -> str | None:
    """The model the drafter of these settings loads (a name or a path); None when it loads none."""
    if settings.draft_max == 0:
        return None
    spec = drafter_spec(settings)
    return None if spec.draft in ("none", "lookup") else spec.model


Note = Callable[[str], None]  # hears one line the user should know about loading (not an error)


def stderr_note(text: str) -> None:
    """How a command-line face tells the user: one ``ds4spec: note:`` line on stderr."""
    print(f"ds4spec: note: {text}", file=sys.stderr)


def load_drafter(settings: Settings, note: Note = stderr_note) -> GuardedDrafter | None:
    """The drafter to speculate with, or None for plain decoding (``--draft none`` or ``--draft-max 0``).

    A drafter the user named must load. The pair's own drafter, used implicitly, may be missing (not pulled
    yet): then ds4spec says so through ``note`` and decodes without speculation rather than refusing to work.
    """
    if settings.draft_max == 0:
        return None
    try:
        drafter = build_drafter(drafter_spec(settings), locate_model)
    except ModelError as exc:
        if settings.draft is not None:
            raise
        fallback = without_pair_drafter(settings)
        note(f"{exc}; " + ("drafting with text lookup only" if fallback.draft == "lookup" else
                           "decoding without speculation"))
        return load_drafter(fallback, note)
    if not drafter:
        return None
    background = drafter_has_spare_cores(settings) and needs_a_worker(drafter.sources)
    return GuardedDrafter(drafter, deadline_s=settings.draft_deadline, background=background, inline=not background)


def without_pair_drafter(settings: Settings) -> Settings:
    """The settings to go on with when the pair's own drafter is missing: the triggers still draft by text
    lookup; without them there is nothing left to speculate with."""
    return replace(settings, draft="lookup" if settings.triggers else "none")


def drafter_has_spare_cores(settings: Settings) -> bool:
    """Whether the drafter can work while the target computes without slowing it (``GuardedDrafter``): a target on
    a GPU leaves the CPU to the drafter; on a CPU the two must not need more threads than there are cores (a
    drafter whose threads are not named counts one: it would work with one beside the target)."""
    if settings.gpu_layers != 0 and gpu_offload_supported():
        return True
    return available_cores() >= (settings.threads or default_threads()) + (settings.draft_threads or 1)


def drafter_threads(settings: Settings) -> int:
    """A model drafter's threads: as named; else one beside a target it works alongside, and otherwise the target's
    own, since it then takes turns with the target on the target's thread (``GuardedDrafter``, ``inline``) and
    the target's cores are idle while it drafts (SmolLM2 reading a 110-token prompt beside an F16 target on 2
    cores: 400 ms on one thread, 215 ms on two; a one-token draft 6.2 and 5.5 ms)."""
    if settings.draft_threads:
        return settings.draft_threads
    return 1 if drafter_has_spare_cores(settings) else settings.threads or default_threads()


def load_rules(settings: Settings) -> RuleBook | None:
    """The trigger rules (built-in, user, ``--triggers``), or None with triggers off; a broken file is an error."""
    if not settings.triggers:
        return None
    return load_rulebook(Path(p).expanduser() for p in settings.trigger_files)


def spec_settings(settings: Settings) -> SpecSettings:
    return SpecSettings(draft_max=settings.draft_max, warmup_tokens=settings.warmup,
                        confidence_stop=settings.confidence_stop)
