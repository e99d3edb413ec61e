"""Flags shared by every command that runs a model, and their mapping onto ``Settings``."""

from __future__ import annotations

import argparse
from typing import Any

from ds4spec.engine.settings import Settings, load_settings


def add_model_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model")
    g.add_argument("--target", metavar="NAME|PATH", help="target model: a name from `ds4spec models list` "
                   "or a path to a GGUF file (default: the pair's target)")
    g.add_argument("--ctx", type=int, metavar="N", help="context size in tokens (default 4096)")
    g.add_argument("--threads", type=int, metavar="N", help="CPU threads (default: all cores up to 4, "
                   "else half of them)")
    g.add_argument("--gpu-layers", type=int, metavar="N", help="layers offloaded to a GPU or Metal "
                   "(default: all when llama.cpp was built with GPU support, else 0)")
    g.add_argument("--batch", type=int, metavar="N", help="tokens per forward pass when reading the "
                   "prompt (default 512)")
    g.add_argument("--mmap", action=argparse.BooleanOptionalAction, default=None, help="compute from the model "
                   "file's mapping, or read the weights into memory (default: read them where every layer runs on "
                   "the CPU, huge pages are on and the file fits in half of the free memory, for faster steps after "
                   "a slower load; `complete`, which answers once, maps them; see docs/setup.md, 'Huge pages')")


def add_speculation_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("speculative decoding")
    g.add_argument("--pair", metavar="NAME", help="model pair giving the target and drafter when not named "
                   "(default: default; see `ds4spec models list`)")
    g.add_argument("--draft", metavar="NAME|PATH|lookup|hybrid|none", help="the drafter: a model name, a GGUF "
                   "file or a transformers model directory, lookup (copies matching earlier text), hybrid "
                   "(lookup, else the pair's model drafter) or none (plain decoding); default: the pair's drafter")
    g.add_argument("--draft-max", type=int, metavar="N", help="the most target tokens per draft; 0 disables "
                   "speculation (default 64; the policies pick shorter drafts where they pay better)")
    g.add_argument("--draft-backend", choices=("llama", "torch"), help="run a model drafter with llama.cpp or "
                   "transformers/torch (default: the pair's choice, else llama)")
    g.add_argument("--p-min", type=float, metavar="P", help="a model drafter stops when its top probability "
                   "falls below P (default 0.3)")
    g.add_argument("--no-heal", dest="heal", action="store_const", const=False, help="a model drafter drafts "
                   "on from the committed tokens as they are, without choosing the last one again (default: "
                   "it does, at no extra forward pass: see docs/speculation.md)")
    g.add_argument("--no-confidence-stop", dest="confidence_stop", action="store_const", const=False,
                   help="a model's draft runs to the length the policy asked for (default: it stops where, by "
                   "the drafter's own probability of its next tokens and how often the target kept such tokens, "
                   "going on would not pay: see docs/speculation.md)")
    g.add_argument("--warmup", type=int, metavar="N", help="draft only once the context holds N tokens, "
                   "prompt included (default 32)")
    g.add_argument("--draft-deadline", type=float, metavar="S", help="a drafter slower than S seconds for one "
                   "draft is benched for the rest of the generation (default 2)")
    g.add_argument("--draft-threads", type=int, metavar="N", help="CPU threads of a model drafter (default for "
                   "llama.cpp: the target's, when the drafter takes turns with the target on its thread, 1 when "
                   "there are cores to spare for it to work beside the target; for torch: 1)")
    g.add_argument("--no-cost-check", dest="cost_check", action="store_const", const=False, help="also ask a "
                   "drafter source whose cost, measured at load, says it cannot beat plain decoding here (the "
                   "policies still stop asking it once they have measured it)")
    g.add_argument("--draft-fixed", dest="draft_fixed", action="store_const", const=True, help="draft exactly "
                   "--draft-max tokens every cycle, asking every drafter source whatever it costs (no cost check, "
                   "no policy: for measuring a drafter and for debugging; usually slower)")
    g.add_argument("--no-triggers", dest="triggers", action="store_const", const=False, help="let one gate "
                   "choose draft lengths instead of syntax-event triggers (triggers are on by default)")
    g.add_argument("--triggers", dest="trigger_files", action="append", metavar="PATH", help="a trigger rule "
                   "file or directory, read after the built-in rules and the user's (repeatable)")
    g.add_argument("--language", metavar="LANG", help="the language of the text, for triggers: a name "
                   "(python, rust, ...), a fence tag or a file name (default: generic code rules)")


def add_sampling_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("generation")
    g.add_argument("--max-tokens", type=int, metavar="N", help="stop after N tokens (default 256)")
    g.add_argument("--temperature", type=float, metavar="T", help="0 is greedy (default 0)")
    g.add_argument("--top-k", type=int, metavar="K", help="sample among the K likeliest tokens; 0 disables "
                   "(default 40)")
    g.add_argument("--top-p", type=float, metavar="P", help="nucleus sampling; 1 disables (default 0.95)")
    g.add_argument("--min-p", type=float, metavar="P", help="drop tokens below P times the likeliest; 0 "
                   "disables (default 0.05)")
    g.add_argument("--repeat-penalty", type=float, metavar="R", help="penalise the last 64 tokens; 1 "
                   "disables (default 1)")
    g.add_argument("--seed", type=int, metavar="N", help="random seed for sampling, 0 to 2^64-1 (default, or -1: "
                   "random, reported by --stats/--json)")
    g.add_argument("--stop", action="append", metavar="TEXT", help="end the output just before TEXT "
                   "(repeatable)")


# argparse's dest names equal the Settings field names.
_SETTING_FLAGS = (
    "target", "ctx", "threads", "gpu_layers", "batch", "mmap", "max_tokens", "temperature", "top_k", "top_p", "min_p",
    "repeat_penalty", "seed", "stop", "pair", "draft", "draft_max", "draft_backend", "p_min", "heal", "confidence_stop",
    "warmup", "draft_deadline", "draft_threads", "cost_check", "draft_fixed", "triggers", "trigger_files", "language",
)


def settings_from_args(args: argparse.Namespace) -> Settings:
    flags: dict[str, Any] = {name: getattr(args, name, None) for name in _SETTING_FLAGS}
    return load_settings(flags)
