"""OpenAI's answer objects: a whole completion, the chunks of a streamed one, and the usage counts.

ds4spec's own statistics ride along under ``"ds4spec"`` (drafted, accepted, speedup, the drafter, the engine's
own finish reason): OpenAI clients ignore fields they do not know.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from ds4spec.faces.http.openai_params import Reply
from ds4spec.faces.http.tool_calls import Called, as_openai, read_calls
from ds4spec.faces.shared.generating import Outcome

# The engine's reasons in OpenAI's words. A generation cut short by the server's shutdown, or one that filled
# the context, did not end by itself, as one that reached max_tokens did not.
FINISH_REASONS = {"eog": "stop", "stop": "stop", "length": "length", "context": "length", "cancelled": "length"}


@dataclass(frozen=True, slots=True)
class Answer:
    """What every object of one answer shares: its id, time, object kind and model name."""

    chat: bool
    model: str
    reply: Reply
    drafter: str | None
    id: str = field(default_factory=lambda: secrets.token_hex(12))
    created: int = field(default_factory=lambda: int(time.time()))

    def _head(self, chunk: bool) -> dict[str, Any]:
        prefix, kind = ("chatcmpl", "chat.completion") if self.chat else ("cmpl", "text_completion")
        return {"id": f"{prefix}-{self.id}", "object": f"{kind}.chunk" if chunk and self.chat else kind,
                "created": self.created, "model": self.model, "system_fingerprint": "ds4spec"}

    def _choice(self, text: str | None, finish_reason: str | None, chunk: bool) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0}
        if not self.chat:
            choice.update(text=text or "", logprobs=None)
        elif chunk:
            choice["delta"] = {} if text is None else {"content": text}
        else:
            choice["message"] = {"role": "assistant", "content": text}
        if self.chat:
            choice["logprobs"] = None
        choice["finish_reason"] = finish_reason
        return choice

    def text(self, outcome: Outcome) -> str:
        """The answer's text: the model's, after the opening the request had written for it."""
        return self.reply.opening + outcome.text

    def whole(self, outcome: Outcome) -> dict[str, Any]:
        called = self.calls(outcome)
        if called is None:
            choice = self._choice(self.text(outcome), finish_reason(outcome), False)
        else:
            choice = self._choice(called.content, "tool_calls", False)
            choice["message"]["tool_calls"] = as_openai(called.calls)
        return {**self._head(False), "choices": [choice], "usage": usage(outcome), "ds4spec": self.statistics(outcome)}

    def calls(self, outcome: Outcome) -> Called | None:
        """The tool calls that end the answer, where tools were offered."""
        return read_calls(self.text(outcome), self.reply.tools) if self.reply.tools else None

    def first_chunk(self) -> dict[str, Any]:
        """A chat stream opens with the assistant's role, as OpenAI's does; a completion stream opens empty. Where
        the answer may be calls, its content opens null, as OpenAI's and llama-server's do: an empty one makes the
        OpenAI SDK's stream helpers and the Agents SDK see a message of text before the calls."""
        choice = self._choice(None if self.chat else "", None, True)
        if self.chat:
            choice["delta"] = {"role": "assistant", "content": None if self.reply.tools else ""}
        return self._chunk([choice])

    def text_chunk(self, text: str) -> dict[str, Any]:
        return self._chunk([self._choice(text, None, True)])

    def calls_chunk(self, called: Called) -> dict[str, Any]:
        choice = self._choice(None, None, True)
        choice["delta"] = {"tool_calls": as_openai(called.calls, indexed=True)}
        return self._chunk([choice])

    def last_chunk(self, outcome: Outcome, called: Called | None) -> dict[str, Any]:
        """The stream's last chunk, for an answer that ended in ``called`` (``calls``) or not."""
        reason = "tool_calls" if called else finish_reason(outcome)
        return {**self._chunk([self._choice(None, reason, True)]), "ds4spec": self.statistics(outcome)}

    def usage_chunk(self, outcome: Outcome) -> dict[str, Any]:
        return {**self._head(True), "choices": [], "usage": usage(outcome)}

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk = {**self._head(True), "choices": choices}
        if self.reply.include_usage:
            chunk["usage"] = None  # as OpenAI does: every chunk but the last has a null usage
        return chunk

    def statistics(self, outcome: Outcome) -> dict[str, Any]:
        stats = outcome.stats.as_dict()
        keep = ("prompt_tokens", "committed_tokens", "drafted_tokens", "accepted_tokens", "acceptance_rate",
                "mean_accepted_length", "tokens_per_second", "speedup_over_plain", "generation_seconds",
                "prompt_seconds", "seed")
        data: dict[str, Any] = {"drafter": self.drafter, "finish_reason": outcome.finish_reason,
                                **{k: stats[k] for k in keep}}
        if self.reply.return_tokens:
            data["tokens"] = list(outcome.tokens)
        return data


def finish_reason(outcome: Outcome) -> str:
    return FINISH_REASONS.get(outcome.finish_reason, "stop")


def usage(outcome: Outcome) -> dict[str, int]:
    prompt, completion = outcome.stats.prompt_tokens, outcome.stats.committed_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
