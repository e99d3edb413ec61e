"""The one typed configuration object, read from the config file, then the environment, then flags.

Later sources win. The file is TOML with the keys below at top level (``$DS4SPEC_CONFIG``, else
``config.toml`` in the user config directory); each key can also be set as ``DS4SPEC_<KEY>`` in the
environment (``DS4SPEC_MAX_TOKENS=128``); ``stop`` in the environment is one string.
"""

from __future__ import annotations

import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.sampling import RANDOM_SEED, SamplingSettings
from ds4spec.errors import UsageError
from ds4spec.paths import config_file


@dataclass(frozen=True, slots=True)
class Settings:
    pair: str = "default"  # the preset giving the target and the drafter when they are not named
    target: str | None = None  # a model name or a path to a GGUF file; None: the pair's target
    draft: str | None = None  # none, lookup, hybrid, a model name or path; None: the pair's drafter
    draft_max: int = 64  # the most target tokens one draft may hold
    draft_backend: str | None = None  # llama or torch for a model drafter; None: the pair's choice (else llama)
    p_min: float = 0.3  # a model drafter stops when its top probability falls below this
    heal: bool = True  # a model drafter chooses the committed text's last token again (``drafters.healing``)
    confidence_stop: bool = True  # a model's draft stops where going on would not pay (``policy.confidence``)
    warmup: int = 32  # speculation starts once the context holds this many tokens (prompt included)
    draft_deadline: float = 2.0  # seconds; a drafter slower than this for one proposal is benched
    draft_threads: int | None = None  # CPU threads of a model drafter; None: see ``loading.drafter_threads``
    cost_check: bool = True  # a drafter source whose measured cost could not pay here is not asked
    draft_fixed: bool = False  # every cycle drafts draft_max tokens from every source, whatever that costs
    triggers: bool = True  # syntax events choose draft lengths and sources (``ds4spec.policy.triggers``)
    trigger_files: tuple[str, ...] = ()  # extra rule files or directories, after the built-in and user ones
    language: str | None = None  # the language of completion text (a name, fence tag or file name)
    ctx: int = 4096
    threads: int | None = None
    gpu_layers: int | None = None
    batch: int = 512
    mmap: bool | None = None  # compute from the model file's mapping; None: read weights into memory where that pays
    launch_ahead: bool | None = None  # start plain steps before the last token's bookkeeping; None: where that pays
    max_tokens: int = 256
    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = field(default_factory=tuple)

    def sampling(self) -> SamplingSettings:
        return SamplingSettings(
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
            repeat_penalty=self.repeat_penalty,
            seed=None if self.seed == RANDOM_SEED else self.seed,
        )

    def target_options(self) -> TargetOptions:
        return TargetOptions(
            n_ctx=self.ctx, n_threads=self.threads, n_gpu_layers=self.gpu_layers, n_batch=self.batch,
            launch_ahead=self.launch_ahead, mmap=self.mmap,
        )


_HINTS = typing.get_type_hints(Settings)
_BOOLS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


def _base_type(name: str) -> type:
    hint = _HINTS[name]
    if isinstance(hint, types.UnionType):
        return next(a for a in typing.get_args(hint) if a is not type(None))
    return typing.get_origin(hint) or hint


def _coerce(name: str, value: Any, source: str) -> Any:
    kind = _base_type(name)
    try:
        if kind is tuple:
            if isinstance(value, str):
                return (value,)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return tuple(value)
            raise TypeError("a list of strings")
        # "none" clears an optional number (DS4SPEC_SEED=none); for strings it is a value (--draft none).
        clears = ("",) if kind is str else ("", "none")
        if value is None or (isinstance(value, str) and value.lower() in clears and _optional(name)):
            if not _optional(name):
                raise TypeError(kind.__name__)
            return None
        if kind is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in _BOOLS:
                return _BOOLS[value.lower()]
            raise TypeError("true or false")
        if kind is int and not isinstance(value, bool):
            return int(value)
        if kind is float and not isinstance(value, bool):
            return float(value)
        if kind is str:
            return str(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{source}: {name} must be {_describe(name)}, got {value!r}") from exc
    raise UsageError(f"{source}: {name} must be {_describe(name)}, got {value!r}")


def _optional(name: str) -> bool:
    return isinstance(_HINTS[name], types.UnionType)


def _describe(name: str) -> str:
    kind = _base_type(name)
    return {int: "an integer", float: "a number", str: "a string", tuple: "a list of strings",
            bool: "true or false"}[kind]


def _from_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from exc
    known = {f.name for f in fields(Settings)}
    for key in data:
        if key not in known:
            raise UsageError(f"{path}: unknown key {key!r} (known: {', '.join(sorted(known))})")
    return {k: _coerce(k, v, str(path)) for k, v in data.items()}


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(Settings):
        var = f"DS4SPEC_{f.name.upper()}"
        if var in env:
            out[f.name] = _coerce(f.name, env[var], var)
    return out


def load_settings(
    flags: Mapping[str, Any] | None = None, *, env: Mapping[str, str] | None = None, path: Path | None = None
) -> Settings:
    """Defaults, then the file, then the environment, then ``flags`` (entries that are None are unset)."""
    env = os.environ if env is None else env
    settings = Settings()
    settings = replace(settings, **_from_file(path or config_file()))
    settings = replace(settings, **_from_env(env))
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    return replace(settings, **{k: _coerce(k, v, "command line") for k, v in given.items()})
