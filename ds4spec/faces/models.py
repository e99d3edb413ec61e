"""``ds4spec models list | pull NAME | verify [NAME] | path NAME``.

Handlers return the exit code and raise Ds4Error subclasses for errors; the main CLI prints those as one line,
``ds4spec: error: <message>``, and exits with the error's code.
"""

from __future__ import annotations

import argparse
import sys

from ds4spec.errors import ModelError, UnknownModelError
from ds4spec.paths import models_dir
from ds4spec.store import local as store
from ds4spec.store.manifests import Manifest, load_manifests, load_pairs


def register(subparsers: argparse._SubParsersAction) -> None:
    models = subparsers.add_parser(
        "models",
        help="list, download, check and locate model files",
        description="Models are GGUF files described by manifests; pairs are a target plus a drafter.",
    )
    sub = models.add_subparsers(dest="models_command", metavar="COMMAND", required=True)

    p = sub.add_parser("list", help="list known models, their state, and the model pairs")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "pull",
        help="download models (checked by sha256)",
        description="Download models into the data directory; a derived model is converted from the model it "
                    "names, pulled first. NAME: a model, a pair (both models) or 'all'.",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="a model, a pair such as 'default', or 'all'")
    p.add_argument("--force", action="store_true", help="download again even if a verified copy is there")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser(
        "verify",
        help="check the size and sha256 of downloaded models",
        description="Check downloaded models (all of them when no NAME is given); exit 1 if any is corrupt.",
    )
    p.add_argument(
        "names", nargs="*", metavar="NAME", help="a model, a pair, or 'all' (default: every pulled model)"
    )
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("path", help="print the path of a downloaded model file")
    p.add_argument("name", metavar="NAME", help="a model name (or a path to a .gguf file)")
    p.set_defaults(func=cmd_path)


def expand_names(names: list[str]) -> list[Manifest]:
    """Model names, pair names and ``all`` to manifests, in order, without repeats."""
    manifests = load_manifests()
    pairs = load_pairs(manifests)
    out: dict[str, Manifest] = {}
    for name in names:
        if name == "all":
            wanted = sorted(manifests)
        elif name in manifests:
            wanted = [name]
        elif name in pairs:
            wanted = [pairs[name].target, pairs[name].drafter]
        else:
            raise UnknownModelError(
                f"unknown model or pair {name!r}; models: {', '.join(sorted(manifests))}; "
                f"pairs: {', '.join(sorted(pairs)) or '(none)'}; or 'all'"
            )
        for w in wanted:
            out.setdefault(w, manifests[w])
    return list(out.values())


def _size(n: int) -> str:
    for unit, div in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= div:
            return f"{n / div:.1f} {unit}" if n < 10 * div else f"{n / div:.0f} {unit}"
    return f"{n} B"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
    manifests = load_manifests()
    pairs = load_pairs(manifests)
    rows = [["NAME", "SIZE", "ARCH", "TOKENIZER", "LICENCE", "STATUS"]]
    for name, m in sorted(manifests.items()):
        rows.append([name, _size(m.size), m.architecture, m.tokenizer, m.license, store.model_status(m)])
    print(_table(rows))
    if pairs:
        print()
        rows = [["PAIR", "TARGET", "DRAFTER", "DESCRIPTION"]]
        for name, p in pairs.items():
            rows.append([name, p.target, p.drafter, p.description])
        print(_table(rows))
    print()
    print(f"models directory: {models_dir()}")
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    for m in expand_names(args.names):
        path = store.pull(m, force=args.force, progress=not args.no_progress)
        print(f"{m.name}: {path}", flush=True)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    if args.names:
        targets = expand_names(args.names)
    else:
        targets = store.pulled_manifests()
        if not targets:
            print(f"no models are downloaded (in {models_dir()}); run `ds4spec models pull default`")
            return 0
    bad: list[str] = []
    for m in targets:
        r = store.verify(m, progress=sys.stderr.isatty())
        if r.ok:
            print(f"ok       {m.name}  {r.path}", flush=True)
        elif r.status == "missing":
            print(f"missing  {m.name}  not downloaded; run `ds4spec models pull {m.name}`", flush=True)
            bad.append(m.name)
        else:
            print(f"CORRUPT  {m.name}  {r.path}: {r.detail}", flush=True)
            bad.append(m.name)
    if bad:
        missing = [m.name for m in targets if m.name in bad and not store.model_path(m).exists()]
        corrupt = [n for n in bad if n not in missing]
        parts = []
        if corrupt:
            parts.append(
                f"corrupt: {', '.join(corrupt)}; run `ds4spec models pull {' '.join(corrupt)} --force`"
            )
        if missing:
            parts.append(
                f"not downloaded: {', '.join(missing)}; run `ds4spec models pull {' '.join(missing)}`"
            )
        raise ModelError("; ".join(parts))
    return 0


def cmd_path(args: argparse.Namespace) -> int:
    print(store.resolve_model(args.name).path)
    return 0
