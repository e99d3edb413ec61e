"""transformers greedy generation from the target GGUF, alone and with an assistant model of another tokenizer.

The assisted peer is transformers' "universal assisted generation": ``generate(assistant_model=...,
tokenizer=..., assistant_tokenizer=...)`` with the pair's drafter, which re-tokenizes each draft through
text, as ds4spec does. Both peers share one loaded target (6 GB in float32 for the 1.5B); the plain one is
the assisted one's own baseline. Their output is compared with llama.cpp's too, but a float32 model
dequantised from Q4 weights is not llama.cpp's Q4 arithmetic, so a mismatch there is expected; the
comparison that tests assisted generation is the one with transformers' own plain output.

Timing: ``generate`` reads the prompt inside, so a streamer notes when each chunk of tokens arrives. The
clock starts at the first chunk after the prompt; that chunk's first token is the one every system gets
with its prompt, and the assisted peer's extra tokens in it (accepted in the same pass as the prompt) are
not credited to the timed part.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ds4spec.bench.peers.base import BenchTask, OutputRule, Peer, PeerResult, PeerSetup
from ds4spec.bench.peers.hf_loading import HfModel, load_hf_model, missing_packages
from ds4spec.errors import Ds4Error

HF_PLAIN = "transformers plain"


class SharedHfTarget:
    """The target loaded once for both transformers peers, freed when the last one closes."""

    def __init__(self, setup: PeerSetup) -> None:
        self.setup = setup
        self._hf: HfModel | None = None
        self._error: BaseException | None = None
        self._users = 0

    def acquire(self) -> HfModel:
        if self._error is not None:  # a second peer would only wait a minute for the same failure
            raise RuntimeError(f"loading the target into transformers failed: {self._error}")
        if self._hf is None:
            try:
                self._hf = load_hf_model(self.setup.target, self.setup.threads)
            except Exception as exc:
                self._error = exc
                raise
        self._users += 1
        return self._hf

    def release(self) -> None:
        self._users -= 1
        if self._users <= 0:
            self._hf = None


class _Timer:
    """A transformers streamer that notes when each chunk of tokens arrives (the first one is the prompt)."""

    def __init__(self) -> None:
        self.chunks: list[tuple[float, int]] = []

    def put(self, value: Any) -> None:
        self.chunks.append((time.perf_counter(), int(value.numel())))

    def end(self) -> None:
        pass


def _rule_criteria(rule: OutputRule, prompt_len: int) -> Any:
    """A transformers stopping criterion that feeds each new token to ds4spec's output rule."""
    import torch
    from transformers import StoppingCriteria

    class RuleCriteria(StoppingCriteria):  # type: ignore[misc]
        def __init__(self) -> None:
            self.fed = prompt_len

        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
            done = rule.finish is not None
            for token in input_ids[0, self.fed:].tolist():
                done = rule.add(int(token))
                if done:
                    break
            self.fed = input_ids.shape[1]
            return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)

    return RuleCriteria()


class HfPlainPeer(Peer):
    name = HF_PLAIN
    family = "transformers"
    baseline = HF_PLAIN

    def __init__(self, setup: PeerSetup, shared: SharedHfTarget) -> None:
        super().__init__(setup)
        self.shared = shared
        self._hf: HfModel | None = None

    def available(self) -> str | None:
        return missing_packages()

    def load(self) -> None:
        self._hf = self.shared.acquire()

    def _extra(self) -> dict[str, Any]:
        return {}

    def run(self, task: BenchTask, max_tokens: int) -> PeerResult:
        import torch
        from transformers import GenerationConfig, StoppingCriteriaList

        hf = self._hf
        assert hf is not None, "run before load"
        prompt = task.prompt
        rule = OutputRule(self.setup.vocab, prompt, max_tokens, task.stop)
        eog = sorted(self.setup.vocab.eog_tokens())
        # A config of our own: the GGUF's may carry sampling defaults that greedy decoding must not see.
        config = GenerationConfig(max_new_tokens=max(min(max_tokens, self.setup.n_ctx - len(prompt)), 1),
                                  do_sample=False, eos_token_id=eog, pad_token_id=eog[0] if eog else None)
        ids = torch.tensor([list(prompt)], dtype=torch.long, device=hf.device)
        timer = _Timer()
        with torch.inference_mode():
            hf.model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config, streamer=timer,
                              stopping_criteria=StoppingCriteriaList([_rule_criteria(rule, len(prompt))]),
                              **self._extra())
        end = time.perf_counter()
        tokens = rule.tokens
        if len(timer.chunks) < 2:  # nothing generated after the prompt
            return PeerResult(tokens, 0.0, 0, rule.reason)
        first_at, first_n = timer.chunks[1]
        timed = max(len(tokens) - (first_n - 1), 0)
        return PeerResult(tokens, end - first_at, timed, rule.reason, *self._acceptance(timer))

    def _acceptance(self, timer: _Timer) -> tuple[int | None, int | None, int | None]:
        return None, None, None

    def close(self) -> None:
        if self._hf is not None:
            self._hf = None
            self.shared.release()


class HfAssistedPeer(HfPlainPeer):
    """Assisted generation with the pair's drafter. Drafted tokens per verify pass are read from the target's
    forward calls (``logits_to_keep`` is the draft length plus one), accepted ones from the chunk sizes."""

    name = "transformers assisted"

    def __init__(self, setup: PeerSetup, shared: SharedHfTarget) -> None:
        super().__init__(setup, shared)
        self._assistant: HfModel | None = None
        self._keeps: list[int] = []

    def _drafter_source(self) -> Path:
        """The drafter's file or directory; raises a one-line ``Ds4Error`` when there is none."""
        from ds4spec.errors import ModelError
        from ds4spec.store.local import resolve_model

        name = self.setup.drafter
        if not name:
            raise ModelError(self.setup.drafter_problem or "the pair has no model drafter")
        directory = Path(name).expanduser()
        return directory if directory.is_dir() else resolve_model(name).path

    def available(self) -> str | None:
        problem = super().available()
        if problem:
            return problem
        try:
            self._drafter_source()
        except Ds4Error as exc:
            return f"no drafter: {exc}"
        return None

    def load(self) -> None:
        self._assistant = load_hf_model(self._drafter_source(), self.setup.threads)
        super().load()

    def _extra(self) -> dict[str, Any]:
        assert self._hf is not None and self._assistant is not None
        return {"assistant_model": self._assistant.model, "tokenizer": self._hf.tokenizer,
                "assistant_tokenizer": self._assistant.tokenizer}

    def run(self, task: BenchTask, max_tokens: int) -> PeerResult:
        assert self._hf is not None
        self._keeps = []

        def note(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
            self._keeps.append(int(kwargs.get("logits_to_keep") or 0))

        handle = self._hf.model.register_forward_pre_hook(note, with_kwargs=True)
        try:
            return super().run(task, max_tokens)
        finally:
            handle.remove()

    def _acceptance(self, timer: _Timer) -> tuple[int | None, int | None, int | None]:
        chunks = timer.chunks[1:]
        if len(chunks) != len(self._keeps) or any(k < 1 for k in self._keeps):
            return None, None, None  # transformers changed how it calls the model: say nothing rather than guess
        drafted = accepted = passes = 0
        for keep, (_, n) in zip(self._keeps, chunks, strict=True):
            if keep > 1:
                drafted += keep - 1
                accepted += n - 1
                passes += 1
        return drafted, accepted, passes

    def close(self) -> None:
        self._assistant = None
        super().close()
