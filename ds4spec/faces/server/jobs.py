"""One generation request (``complete`` or ``chat``) and how the worker runs it against the engine.

The job's ``cancel`` event is what the engine polls once per speculative cycle (or plain step), and at each graph
node while the prompt is read, so a cancel, a superseding request, a shutdown or the end of a line or block all stop
generation within one cycle. The
generation itself is ``faces.shared.generating``, shared with the HTTP server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ds4spec.engine.engine import Engine
from ds4spec.faces.server.rpc import RequestId
from ds4spec.faces.shared.generating import Outcome, run_generation
from ds4spec.faces.shared.generation_params import ChatParams, CompleteParams

__all__ = ["Job", "Outcome", "run_job"]


@dataclass(eq=False, slots=True)
class Job:
    request_id: RequestId
    params: CompleteParams | ChatParams
    cancel: threading.Event = field(default_factory=threading.Event)
    why: str = "request cancelled"  # the error message when ``cancel`` is set: cancelled, superseded, shutdown

    @property
    def document(self) -> str | None:
        return self.params.document if isinstance(self.params, CompleteParams) else None

    def stop(self, why: str) -> None:
        self.why = why
        self.cancel.set()


def run_job(engine: Engine, job: Job, partial: Callable[[str], None]) -> Outcome:
    """Generates for ``job``, calling ``partial`` with each newly final piece of text when it streams.

    Raises what the engine raises for a prompt it cannot use (``InputError``, ``ModelError``).
    """
    return run_generation(engine, job.params, job.cancel.is_set, partial)
