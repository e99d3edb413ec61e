"""llama.cpp's own server as peers: plain decoding and its speculative modes (``--spec-type``), in C++.

This is what a user would run instead of ds4spec. Each mode is its own ``llama-server`` process (the server
fixes the speculative type at start), on the same target file, context, batch, threads and GPU layers as
ds4spec's target, one slot, prompt cache off, bound to localhost. Completion prompts go to ``/completion``
as raw text and chat prompts to ``/v1/chat/completions`` with the model's own template (``--jinja``): the
server renders and tokenizes them itself, and every run checks that its prompt has as many tokens as
ds4spec's. Speed, drafted and accepted tokens come from the server's own ``timings``; the output is cut by
ds4spec's output rule, so that it compares token for token with every other system.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ds4spec.backend.huge_pages import environment_as_started
from ds4spec.backend.runtime import default_threads
from ds4spec.backend.weights_memory import reads_model_weights
from ds4spec.bench.peers.base import BenchTask, OutputRule, Peer, PeerResult, PeerSetup
from ds4spec.bench.peers.server_build import ServerBuild, ServerUnavailable, installed_build
from ds4spec.core.events import FinishReason

SERVER_PLAIN = "llama-server plain"
# llama-server plain with its weights where ds4spec's target has them, read into memory on huge pages
# (``backend.weights_memory``): what its users get by asking for it, and the strongest plain llama.cpp here.
SERVER_READ = "llama-server plain, read"
# The modes `--peers llama-server` runs, each with llama.cpp's default settings; others by name.
DEFAULT_SPEC_TYPES = ("ngram-simple", "ngram-mod", "ngram-map-k", "draft-simple")
START_TIMEOUT_S = 600.0  # loading an F16 target and its drafter from a cold disk
REQUEST_TIMEOUT_S = 1800.0
_FINISH = {"eos": FinishReason.EOG, "word": FinishReason.STOP, "limit": FinishReason.LENGTH}


class ServerPeerError(RuntimeError):
    """The server misbehaved (did not start, answered an error, read a different prompt)."""


class SharedServerBuild:
    """The one llama-server build that every llama-server peer of a bench uses, built on first need."""

    def __init__(self, log: Callable[[str], None], build: ServerBuild | None = None) -> None:
        self._log = log
        self._build = build
        self._problem: str | None = None

    def problem(self) -> str | None:
        """Why there can be no server (no record of the build flags, no compiler), or None."""
        if self._build is None and self._problem is None:
            try:
                self._build = installed_build()
            except ServerUnavailable as exc:
                self._problem = str(exc)
        return self._problem or (self._build.missing_tools() if self._build else None)

    def binary(self) -> Path:
        problem = self.problem()
        if problem or self._build is None:
            raise ServerUnavailable(problem or "no llama-server build")
        try:
            return self._build.ensure(self._log)
        except ServerUnavailable as exc:
            self._problem = str(exc)  # a failed build is not retried by the next mode
            raise

    @property
    def library_dirs(self) -> list[str]:
        """Folders of shared libraries named in the build flags (a cuBLAS from PyPI), for the loader."""
        flags = self._build.flags if self._build else ()
        return [str(Path(f.split("=", 1)[1]).parent) for f in flags if f.startswith("-DCUDA_cublas_LIBRARY=")]


class LlamaServerPeer(Peer):
    family = "llama-server"
    baseline = SERVER_PLAIN

    def __init__(self, setup: PeerSetup, spec_type: str | None, build: SharedServerBuild, *,
                 reads_weights: bool = False) -> None:
        super().__init__(setup)
        self.spec_type = spec_type
        self.reads_weights = reads_weights
        self.name = f"llama-server {spec_type}" if spec_type else SERVER_READ if reads_weights else SERVER_PLAIN
        self._build = build
        self._process: subprocess.Popen[bytes] | None = None
        self._client: httpx.Client | None = None
        self._log_path: Path | None = None

    @property
    def _needs_drafter(self) -> bool:
        return bool(self.spec_type and self.spec_type.startswith("draft-"))

    def available(self) -> str | None:
        if not self.setup.target.is_file():
            return f"{self.setup.target} does not exist"
        if self._needs_drafter and self.setup.family_drafter is None:
            return self.setup.family_drafter_problem or "no drafter with the target's vocabulary"
        return self._build.problem()

    def command(self, binary: Path, port: int) -> list[str]:
        s = self.setup
        threads = str(s.threads or default_threads())
        gpu = s.layers_on_gpu(999)
        cmd = [str(binary), "--model", str(s.target), "--host", "127.0.0.1", "--port", str(port),
               "--ctx-size", str(s.n_ctx), "--batch-size", str(s.n_batch), "--ubatch-size", str(s.n_batch),
               "--threads", threads, "--threads-batch", threads, "--n-gpu-layers", str(gpu), "--parallel", "1",
               "--flash-attn", "auto", "--jinja", "--no-webui", "--no-cache-prompt", "--cache-ram", "0"]
        if self.spec_type:
            cmd += ["--spec-type", self.spec_type]
        if self._needs_drafter and s.family_drafter is not None:
            cmd += ["--spec-draft-model", str(s.family_drafter), "--spec-draft-ngl", str(gpu)]
        if self.reads_weights:
            cmd += ["--load-mode", "none"]
        return cmd

    def load(self) -> None:
        binary = self._build.binary()
        port = _free_port()
        fd, log = tempfile.mkstemp(prefix="ds4spec-llama-server-", suffix=".log")
        self._log_path = Path(log)
        # As its users run it: computing from the file's mapping, without the tunable ds4spec set for itself; or
        # with both as ds4spec's target has them.
        env = dict(os.environ) if self.reads_weights else environment_as_started(os.environ)
        if self._build.library_dirs:
            env["LD_LIBRARY_PATH"] = os.pathsep.join([*self._build.library_dirs, env.get("LD_LIBRARY_PATH", "")])
        with os.fdopen(fd, "wb") as out:
            self._process = subprocess.Popen(self.command(binary, port), stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self._client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=REQUEST_TIMEOUT_S)
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self._process is not None and self._client is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ServerPeerError(f"llama-server exited with status {self._process.returncode}: "
                                      f"{self._log_excerpt()}")
            try:
                if self._client.get("/health", timeout=5.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.2)
        raise ServerPeerError(f"llama-server did not get ready in {START_TIMEOUT_S:.0f} s: {self._log_excerpt()}")

    def _log_excerpt(self) -> str:
        lines = self._log_path.read_text(errors="replace").splitlines() if self._log_path else []
        lines = [ln.strip() for ln in lines if ln.strip()]
        errors = [ln for ln in lines if "error" in ln.lower() or "failed" in ln.lower()]
        line = (errors or lines or ["no output"])[-1]
        return line if len(line) <= 200 else line[:197] + "..."

    def run(self, task: BenchTask, max_tokens: int) -> PeerResult:
        assert self._client is not None, "run before load"
        common: dict[str, Any] = {"temperature": 0.0, "top_k": 1, "cache_prompt": False, "return_tokens": True}
        if task.stop:
            common["stop"] = list(task.stop)
        if task.messages:
            body = {"messages": [{"role": m.role, "content": m.content} for m in task.messages],
                    "max_tokens": max_tokens, "verbose": True, **common}
            answer = self._post("/v1/chat/completions", body)
            details = answer.get("__verbose") or {}
        else:
            if task.text is None:
                raise ServerPeerError(f"{task.task_id} has neither text nor messages")
            details = answer = self._post("/completion", {"prompt": task.text, "n_predict": max_tokens, **common})
        read = int(details.get("tokens_evaluated", -1))
        if read != len(task.prompt):
            raise ServerPeerError(f"llama-server read a prompt of {read} tokens where ds4spec's has "
                                  f"{len(task.prompt)}: the two render or tokenize it differently")
        return self._result(task, max_tokens, details, answer.get("timings") or {})

    def _result(self, task: BenchTask, max_tokens: int, details: dict[str, Any],
                timings: dict[str, Any]) -> PeerResult:
        rule = OutputRule(self.setup.vocab, task.prompt, max_tokens, task.stop)
        for token in details.get("tokens") or ():
            if rule.add(int(token)):
                break
        reason = rule.reason if rule.finish else _FINISH.get(str(details.get("stop_type")), FinishReason.LENGTH).value
        drafted = int(timings.get("draft_n", 0)) if self.spec_type else None
        accepted = int(timings.get("draft_n_accepted", 0)) if self.spec_type else None
        return PeerResult(rule.tokens, float(timings.get("predicted_ms", 0.0)) / 1000,
                          credited_tokens(details, timings), reason, drafted, accepted)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self._client is not None
        response = self._client.post(path, json=body)
        if response.status_code != 200:
            raise ServerPeerError(f"llama-server answered {response.status_code} to {path}: {response.text[:160]}")
        data: dict[str, Any] = response.json()
        return data

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)


def credited_tokens(details: dict[str, Any], timings: dict[str, Any]) -> int:
    """The tokens the server's generation time is credited with, counted as ds4spec counts its own: output tokens.

    The server's ``predicted_n`` counts the end-of-generation token it sampled last, which is no output: ds4spec's
    clock covers the same passes (one per output token when the answer ends there) and credits one token fewer.
    Left in, it is one free token per answer that ends so: +1.2% on an 84-token answer.
    """
    predicted = int(timings.get("predicted_n", 0))
    return max(predicted - 1, 0) if details.get("stop_type") == "eos" else predicted


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def server_peers(setup: PeerSetup, spec_types: tuple[str, ...], log: Callable[[str], None],
                 build: ServerBuild | None = None) -> list[Peer]:
    """llama-server plain, the baseline of its family, then plain with its weights read into memory where
    ds4spec's target has them so, then one peer per speculative type, sharing one build (by default the one
    matching the installed llama-cpp-python)."""
    shared = SharedServerBuild(log, build)
    read = reads_model_weights(setup.mmap, setup.layers_on_gpu(999), setup.target)
    return [LlamaServerPeer(setup, None, shared), *([LlamaServerPeer(setup, None, shared, reads_weights=True)]
                                                    if read else []),
            *(LlamaServerPeer(setup, t, shared) for t in spec_types)]
