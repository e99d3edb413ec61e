"""Loaded models and one generation at a time: what every face (complete, chat, REPL, editor server) drives.

An ``Engine`` holds the target and, when speculating, a guarded drafter. It turns a completion, a
fill-in-the-middle request or a chat conversation into target tokens (refusing a prompt that does not fit
the context, with a one-line ``InputError``) and returns the event stream of ``ds4spec.core.events``. It knows
nothing of screens. Generation holds a lock: one at a time, from any one thread; ``cancelled`` is polled
once per speculative cycle (or plain step).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ds4spec.backend.prompt import ChatMessage, chat_tokens, completion_tokens, fim_tokens
from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.tokenizer import LlamaTokenizer
from ds4spec.core.contracts import DraftPolicy
from ds4spec.core.drafting import DraftContext
from ds4spec.core.events import Event
from ds4spec.core.messages import ToolSpec, as_text_messages
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import SamplingSettings
from ds4spec.core.speculative import generate_speculative
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.engine.loading import (
    Note,
    check_settings,
    draft_costs_key,
    drafter_spec,
    load_drafter,
    load_rules,
    load_target,
    spec_settings,
    stderr_note,
)
from ds4spec.engine.settings import Settings
from ds4spec.errors import ContextOverflow, InputError
from ds4spec.policy.costs import unasked_note
from ds4spec.policy.gate import FixedLength, GatedPolicy
from ds4spec.policy.memory import PolicyMemory
from ds4spec.policy.profile import VerifyProfile, profile_for
from ds4spec.policy.rules import RuleBook

Cancelled = Callable[[], bool]
FIT_HINT = "shorten it or raise --ctx"  # what a user can do about a prompt longer than the context


def _never() -> bool:
    return False


def _special_text(tok: LlamaTokenizer, token: int) -> str:
    return tok.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""


@dataclass(frozen=True, slots=True)
class Prompt:
    """Target tokens to generate from, and what the drafter is told the generation starts from."""

    tokens: list[int]
    context: DraftContext
    language: str | None = None  # for triggers: the text's language; chat answers are markdown


class Engine:
    def __init__(self, settings: Settings, target: LlamaTarget, drafter: GuardedDrafter | None,
                 rules: RuleBook | None = None, note: Note = stderr_note) -> None:
        """An engine over loaded models, measuring nothing: its policies start from priors. ``assemble`` (and
        ``load``) also measure what the policies start from."""
        self.settings = settings
        self.note = note  # what the user should know about a drafter (the face decides where it is shown)
        self.target = target
        self.drafter = drafter
        self.rules = rules  # trigger rules; None: one gate for every cycle
        self.profile: VerifyProfile | None = None  # the target's verify costs here; read once a drafter is measured
        self.memory: PolicyMemory | None = None  # what policies learned about this drafter, across generations
        self.speculation = drafter is not None  # /spec on|off: a loaded drafter may be left idle
        self.drafter_from_settings = False  # whether the drafter is what the settings name: its costs may be cached
        self._lock = threading.Lock()

    @classmethod
    def assemble(cls, settings: Settings, target: LlamaTarget, drafter: GuardedDrafter | None,
                 rules: RuleBook | None = None, note: Note = stderr_note, *,
                 drafter_from_settings: bool = False) -> Engine:
        """An engine whose drafter is measured now: the target's verify profile (cached on disk per machine
        and model) and each of the drafter's sources' costs, which the cost check and the policies start from
        (cached on disk too where the drafter is the one ``settings`` name: ``drafter_from_settings``)."""
        engine = cls(settings, target, drafter, rules, note)
        engine.drafter_from_settings = drafter_from_settings
        engine._measure_drafter()
        return engine

    def _measure_drafter(self) -> None:
        """A new drafter starts afresh: its sources' costs measured against the target's verify profile."""
        self.memory = None
        if self.drafter is not None:
            if self.profile is None:
                self.profile = profile_for(self.target)
            check = self.settings.cost_check and not self.settings.draft_fixed  # fixed: every source is asked
            self.memory = PolicyMemory.measure(self.drafter, self.profile, self.settings.draft_max, check=check,
                                              cache_key=self._costs_key() if check else None)
            self.drafter.follow_only(self.memory.sources)
            unasked = unasked_note(self.drafter.name, self.memory.costs, self.profile)
            if unasked:
                self.note(unasked)

    def _costs_key(self) -> str | None:
        if not self.drafter_from_settings or self.drafter is None:
            return None
        return draft_costs_key(self.settings, self.target, self.drafter.name)

    @classmethod
    def load(cls, settings: Settings, note: Note = stderr_note) -> Engine:
        """Loads the target, then the drafter (see ``load_drafter`` for a missing one), and measures the drafter
        (``assemble``); ``note`` hears what the user should know (a missing or too slow drafter), on stderr by
        default. The face has checked ``settings`` (``check_settings``) before it started any work."""
        rules = load_rules(settings)  # a broken rule file fails before minutes of model loading
        if rules is not None and settings.language and not rules.knows(settings.language):
            known = ", ".join(sorted(name for name in rules.families if name != "default"))
            note(f"no trigger rules know the language {settings.language!r}, so the generic code rules apply "
                 f"(known: {known})")
        target = load_target(settings)
        try:
            drafter = load_drafter(settings, note)
        except BaseException:
            target.close()
            raise
        return cls.assemble(settings, target, drafter, rules, note, drafter_from_settings=True)

    # -- identity ---------------------------------------------------------------------------------------

    @property
    def target_name(self) -> str:
        return self.target.name

    @property
    def drafter_name(self) -> str | None:
        """The drafter's name, or None when there is none (``--draft none``, or the pair's was missing)."""
        if self.drafter is None:
            return None
        return self.drafter.name

    @property
    def speculating(self) -> bool:
        return self.speculation and self.drafter is not None

    def set_speculation(self, on: bool) -> None:
        """Turns speculation on or off from the next generation on; the drafter stays loaded either way."""
        self.speculation = on

    def set_draft(self, draft: str) -> None:
        """Swaps the drafter (a model name or path, ``lookup``, ``hybrid`` or ``none``); errors leave the old one."""
        settings = dataclasses.replace(self.settings, draft=draft)
        check_settings(settings)
        drafter_spec(settings)  # an unknown pair or name fails here, before anything is closed
        with self._lock:
            new = load_drafter(settings, self.note)
            old, self.drafter, self.settings = self.drafter, new, settings
            self.speculation = new is not None
            self.drafter_from_settings = True
            self._measure_drafter()
        if old is not None:
            old.close()

    # -- prompts ----------------------------------------------------------------------------------------

    def completion_prompt(self, prefix: str, suffix: str | None = None, language: str | None = None, *,
                          keep_end: bool = False, hint: str = FIT_HINT) -> Prompt:
        """Continue ``prefix``; with a ``suffix``, fill in the middle between the two. ``language`` (a name,
        fence tag or file name) picks the trigger rules; default: the settings' ``language``. With ``keep_end``
        a completion too long for the context loses its beginning instead of being refused; ``hint`` ends the
        error of a prompt that does not fit (what the user can do about it, in the face's terms)."""
        tok = self.target.tokenizer
        if suffix is not None:
            tokens = fim_tokens(tok, prefix, suffix)
            self.check_fits(tokens, hint)
            # The drafter continues the text the target sees: for FIM, the text before the cursor.
            return Prompt(tokens, DraftContext(text=prefix.encode("utf-8")), language or self.settings.language)
        tokens = completion_tokens(tok, prefix)
        n_ctx = self.target.n_ctx
        if keep_end and len(tokens) >= n_ctx:
            # Keep room for the answer, but never less than half the context for the prompt.
            tokens = tokens[-max(n_ctx - self.settings.max_tokens, n_ctx // 2):]
            seen = tok.detokenize(tokens)
        else:
            self.check_fits(tokens, hint)
            seen = prefix.encode("utf-8")
        return Prompt(tokens, DraftContext(text=seen), language or self.settings.language)

    def chat_prompt(self, messages: Sequence[ChatMessage], hint: str = FIT_HINT, tools: Sequence[ToolSpec] = (),
                    opening: str = "") -> Prompt:
        """The conversation in the target's chat template, with the ``tools`` it may call and an open assistant
        turn that starts with ``opening`` (plain text, for the model to go on with)."""
        tokens = self._chat_tokens(messages, tools) + self.target.tokenizer.tokenize(opening.encode("utf-8"))
        self.check_fits(tokens, hint)
        return Prompt(tokens, DraftContext(messages=as_text_messages(messages, tools)), "markdown")

    def chat_size(self, messages: Sequence[ChatMessage]) -> int:
        """How many tokens of the context the conversation takes, whether it fits or not."""
        return len(self._chat_tokens(messages))

    def token_count(self, text: str) -> int:
        """How many target tokens ``text`` is, inside a prompt (no start token)."""
        return len(self.target.tokenizer.tokenize(text.encode("utf-8")))

    def _chat_tokens(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> list[int]:
        tok = self.target.tokenizer
        return chat_tokens(tok, self.target.chat_template, messages,
                           bos=_special_text(tok, tok.bos), eos=_special_text(tok, tok.eos), tools=tools)

    def check_fits(self, tokens: Sequence[int], hint: str = FIT_HINT) -> None:
        if not tokens:
            # A model that adds no start token turns an empty text into no tokens: nothing to predict from.
            raise InputError("the prompt is empty and the model adds no start token: there is nothing to continue")
        n_ctx = self.target.n_ctx
        if len(tokens) >= n_ctx:
            raise ContextOverflow(
                f"the prompt is {len(tokens)} tokens but the context holds {n_ctx} "
                f"(the model was trained on up to {self.target.n_ctx_train}); {hint}"
            )

    # -- generation -------------------------------------------------------------------------------------

    def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        cancelled: Cancelled = _never,
        sampling: SamplingSettings | None = None,
    ) -> Iterator[Event]:
        """The event stream for ``prompt``: ``TextChunk``s, ``CycleReport``s when speculating, one ``Finished``.
        ``sampling`` replaces the settings' own for this generation (a server's per-request temperature)."""
        request = GenerationRequest(
            prompt.tokens,
            self.settings.max_tokens if max_tokens is None else max_tokens,
            self.settings.sampling() if sampling is None else sampling,
            tuple(self.settings.stop if stop is None else stop),
        )
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("the engine is already generating; one generation at a time")
        try:
            drafter = self.drafter if self.speculation else None
            if drafter is None:
                yield from generate_plain(self.target, request, cancelled=cancelled)
            else:
                yield from generate_speculative(self.target, drafter, request, prompt.context,
                                                spec_settings(self.settings), policy=self.policy(prompt),
                                                cancelled=cancelled)
        finally:
            self._lock.release()

    def policy(self, prompt: Prompt) -> DraftPolicy:
        """Triggers for the prompt's language, or one gate; both keep learning across generations. With
        ``draft_fixed``, always ``draft_max`` tokens."""
        if self.settings.draft_fixed:
            return FixedLength(self.settings.draft_max)
        if self.memory is None:
            return GatedPolicy(self.settings.draft_max)
        return self.memory.policy(self.rules, prompt.language, self.settings.draft_max)

    def complete(self, prefix: str, suffix: str | None = None, **kwargs: object) -> Iterator[Event]:
        return self.generate(self.completion_prompt(prefix, suffix), **kwargs)  # type: ignore[arg-type]

    def chat(self, messages: Sequence[ChatMessage], **kwargs: object) -> Iterator[Event]:
        return self.generate(self.chat_prompt(messages), **kwargs)  # type: ignore[arg-type]

    def close(self) -> None:
        if self.drafter is not None:
            self.drafter.close()
            self.drafter = None
        self.target.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
