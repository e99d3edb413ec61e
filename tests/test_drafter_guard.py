"""The guard around a drafter: without cores to spare, the drafter is left alone until a draft is asked for."""

from __future__ import annotations

import threading
import time

import pytest

from ds4spec.core.drafting import Draft, DraftContext, Drafter
from ds4spec.drafters.guard import GuardedDrafter, needs_a_worker


class RecordingDrafter(Drafter):
    """Records every call it gets, in order; ``prepare`` takes ``prepare_s`` seconds (reading a prompt)."""

    name = "recording"
    sources = ("lookup", "model")

    def __init__(self, prepare_s: float = 0.0) -> None:
        self.calls: list[tuple[str, object]] = []
        self.prepare_s = prepare_s

    def begin(self, context: DraftContext) -> None:
        self.calls.append(("begin", context.text))

    def extend(self, committed: bytes) -> None:
        self.calls.append(("extend", committed))

    def prepare(self, source: str = "any") -> None:
        time.sleep(self.prepare_s)
        self.calls.append(("prepare", source))

    def follow_only(self, sources: tuple[str, ...]) -> None:
        self.calls.append(("follow_only", sources))

    def propose(self, max_tokens: int) -> Draft:
        self.calls.append(("propose", max_tokens))
        return Draft(b" more", "model", 1)

    def propose_from(self, source: str, max_tokens: int) -> Draft:
        self.calls.append((f"propose_from:{source}", max_tokens))
        return Draft(b" more", source, 1)


def _follow(guard: GuardedDrafter, pieces: list[bytes]) -> None:
    guard.begin(DraftContext(text=b"prompt"))
    guard.warm()
    for piece in pieces:
        guard.extend(piece)


def test_without_background_the_drafter_does_nothing_until_asked_for_a_draft() -> None:
    drafter = RecordingDrafter()
    guard = GuardedDrafter(drafter, background=False)
    _follow(guard, [b"a", b"bc", b"d"])
    time.sleep(0.05)
    assert drafter.calls == []
    assert guard.propose(4, source="model").text == b" more"
    assert drafter.calls == [("begin", b"prompt"), ("extend", b"abcd"), ("prepare", "model"),
                             ("propose_from:model", 4)]
    guard.extend(b"e")
    guard.propose(2)
    assert drafter.calls[4:] == [("extend", b"e"), ("prepare", "any"), ("propose", 2)]
    guard.close()


def test_with_background_the_drafter_follows_the_text_and_reads_its_prompt_at_once() -> None:
    drafter = RecordingDrafter()
    guard = GuardedDrafter(drafter, background=True)
    _follow(guard, [b"a", b"bc"])
    guard.propose(4, source="lookup")
    assert drafter.calls == [("begin", b"prompt"), ("prepare", "any"), ("extend", b"a"), ("extend", b"bc"),
                             ("propose_from:lookup", 4)]
    guard.close()


@pytest.mark.parametrize("background", [True, False], ids=["background", "on-demand"])
def test_a_drafter_none_of_whose_sources_will_be_asked_follows_no_text(background: bool) -> None:
    """The cost check ruled every source out: the drafter is left alone for good, and nothing is proposed."""
    drafter = RecordingDrafter()
    guard = GuardedDrafter(drafter, background=background)
    guard.follow_only(())
    _follow(guard, [b"a", b"bc"])
    assert guard.propose(4, source="model").text == b""
    assert guard.settle()
    assert drafter.calls == []
    guard.close()


def test_the_sources_that_will_be_asked_are_passed_on_to_the_drafter() -> None:
    drafter = RecordingDrafter()
    guard = GuardedDrafter(drafter, background=True)
    guard.follow_only(("model",))
    _follow(guard, [b"a"])
    assert guard.propose(4, source="model").text == b" more"
    assert drafter.calls == [("follow_only", ("model",)), ("begin", b"prompt"), ("prepare", "any"),
                             ("extend", b"a"), ("propose_from:model", 4)]
    guard.close()


def test_a_drafter_left_with_text_lookup_only_runs_inline_on_the_callers_thread() -> None:
    """The cost check left lookup alone (a GPU's target steps faster than the model drafts): a search of the text
    is no work for a thread of its own, and a hop to the worker and back costs more than the search."""
    drafter = ThreadRecordingDrafter()
    guard = GuardedDrafter(drafter, background=True)
    guard.follow_only(("lookup",))
    _follow(guard, [b"a", b"bc"])
    assert drafter.calls == [("follow_only", ("lookup",))]  # the text is recorded, not queued
    assert guard.propose(4, source="lookup").text == b" more"
    assert drafter.calls[1:] == [("begin", b"prompt"), ("extend", b"abc"), ("prepare", "lookup"),
                                 ("propose_from:lookup", 4)]
    assert drafter.threads == {threading.get_ident()}
    guard.close()


@pytest.mark.parametrize(("sources", "worker"), [(("lookup",), False), (("model",), True),
                                                 (("lookup", "model"), True)])
def test_only_a_model_source_is_worth_a_worker_thread(sources: tuple[str, ...], worker: bool) -> None:
    assert needs_a_worker(sources) is worker


def test_catching_up_is_reported_apart_from_drafting_and_has_its_own_deadline() -> None:
    """Reading a long prompt takes longer than the draft deadline: that is work, not a hang."""
    # The proposal after it has a deadline five times a scheduler stall (100 to 200 ms on a busy machine).
    guard = GuardedDrafter(RecordingDrafter(prepare_s=1.0), deadline_s=0.5, background=False)
    _follow(guard, [b"text"])
    draft = guard.propose(4)
    assert draft.text == b" more" and draft.sync_seconds >= 1.0
    assert guard.failures.total == 0 and guard.available
    guard.close()


def test_only_reading_the_prompt_is_reported_apart_later_catch_ups_are_part_of_the_draft() -> None:
    """Reading what was committed since the last draft happens every drafting cycle: it is a draft's cost."""
    guard = GuardedDrafter(RecordingDrafter(prepare_s=0.05), background=False)
    _follow(guard, [b"text"])
    assert guard.propose(4).sync_seconds >= 0.05
    guard.extend(b" more")
    draft = guard.propose(4)
    assert draft.sync_seconds == 0.0 and draft.read_seconds >= 0.05  # every read, for a policy that charges reads
    guard.close()


def test_a_call_alone_runs_on_the_worker_and_a_failing_one_gives_none() -> None:
    drafter = RecordingDrafter()
    guard = GuardedDrafter(drafter, background=False)
    assert guard.call_alone(lambda d: d.propose_from("model", 1).text) == b" more"
    assert drafter.calls == [("propose_from:model", 1)]

    def broken(d: Drafter) -> bytes:
        raise RuntimeError("no model")

    assert guard.call_alone(broken) is None
    assert guard.failures.raised == 1
    guard.close()


def test_a_new_generation_drops_the_text_recorded_for_the_last_one() -> None:
    drafter = RecordingDrafter()
    guard = GuardedDrafter(drafter, background=False)
    _follow(guard, [b"old"])
    guard.begin(DraftContext(text=b"fresh"))
    guard.extend(b"new")
    guard.propose(1)
    assert drafter.calls[:2] == [("begin", b"fresh"), ("extend", b"new")]
    guard.close()


def test_a_drafter_that_fails_to_catch_up_is_benched_for_the_generation() -> None:
    class Lost(RecordingDrafter):
        def extend(self, committed: bytes) -> None:
            raise RuntimeError("tokenizer bug")

    guard = GuardedDrafter(Lost(), background=False)
    _follow(guard, [b"x"])
    assert guard.propose(4).text == b""
    assert guard.failures.raised == 1 and not guard.available
    guard.begin(DraftContext(text=b"next"))
    assert guard.available  # the next generation starts it afresh
    guard.close()


class ClosableDrafter(RecordingDrafter):
    """``extend`` blocks until ``release`` is set; records whether ``close`` came while an ``extend`` ran."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.extending = False
        self.closes: list[bool] = []  # one entry per close: was an extend running?

    def extend(self, committed: bytes) -> None:
        self.extending = True
        self.release.wait(5)
        super().extend(committed)
        self.extending = False

    def close(self) -> None:
        self.closes.append(self.extending)


def test_closing_waits_for_the_running_call_before_closing_the_drafter() -> None:
    """A llama.cpp drafter freed under a running tokenize crashes the process (seen in CI)."""
    drafter = ClosableDrafter()
    guard = GuardedDrafter(drafter, background=True)
    guard.begin(DraftContext(text=b"prompt"))
    guard.extend(b"running")
    deadline = time.monotonic() + 5
    while not drafter.extending and time.monotonic() < deadline:
        time.sleep(0.001)
    guard.extend(b"queued")  # dropped by close, so the last future is done (cancelled) at once
    guard.close()
    assert drafter.closes == []
    drafter.release.set()
    deadline = time.monotonic() + 5
    while not drafter.closes and time.monotonic() < deadline:
        time.sleep(0.005)
    assert drafter.closes == [False]
    assert drafter.calls == [("begin", b"prompt"), ("extend", b"running")]
    guard.close()
    assert drafter.closes == [False], "closed once"


def test_an_idle_guard_closes_its_drafter_at_once_and_settle_waits_for_queued_calls() -> None:
    drafter = ClosableDrafter()
    drafter.release.set()
    guard = GuardedDrafter(drafter, background=True)
    guard.begin(DraftContext(text=b"prompt"))
    guard.extend(b"a")
    assert guard.settle()
    assert drafter.calls == [("begin", b"prompt"), ("extend", b"a")]
    guard.close()
    assert drafter.closes == [False]


def test_settle_gives_up_at_its_deadline_while_a_call_still_runs() -> None:
    drafter = ClosableDrafter()
    guard = GuardedDrafter(drafter, background=True)
    guard.extend(b"slow")
    assert not guard.settle(0.05)
    drafter.release.set()
    assert guard.settle()
    guard.close()


class ThreadRecordingDrafter(RecordingDrafter):
    """Records the thread of every call; ``propose`` takes ``propose_s`` seconds, or raises with ``fail``."""

    def __init__(self, propose_s: float = 0.0, fail: bool = False) -> None:
        super().__init__()
        self.threads: set[int] = set()
        self.propose_s, self.fail = propose_s, fail

    def begin(self, context: DraftContext) -> None:
        self.threads.add(threading.get_ident())
        super().begin(context)

    def prepare(self, source: str = "any") -> None:
        self.threads.add(threading.get_ident())
        super().prepare(source)

    def propose(self, max_tokens: int) -> Draft:
        self.threads.add(threading.get_ident())
        time.sleep(self.propose_s)
        if self.fail:
            raise RuntimeError("drafter bug")
        return super().propose(max_tokens)


def test_inline_every_call_runs_on_the_callers_thread() -> None:
    """A drafter taking turns with the target computes on the target's thread (llama.cpp's OpenMP pool is per
    thread: a second one slows the target's later steps)."""
    drafter = ThreadRecordingDrafter()
    guard = GuardedDrafter(drafter, background=False, inline=True)
    _follow(guard, [b"a", b"b"])
    assert guard.propose(3).text == b" more"
    assert guard.call_alone(lambda inner: inner.name) == "recording"
    assert drafter.threads == {threading.get_ident()}
    assert drafter.calls[:3] == [("begin", b"prompt"), ("extend", b"ab"), ("prepare", "any")]
    guard.close()


def test_inline_a_failing_drafter_gives_no_draft_and_is_counted() -> None:
    guard = GuardedDrafter(ThreadRecordingDrafter(fail=True), background=False, inline=True)
    _follow(guard, [b"x"])
    assert guard.propose(4).text == b""
    assert guard.failures.raised == 1 and guard.available  # a raising proposal costs that cycle's draft only
    guard.close()


def test_inline_a_proposal_past_its_deadline_is_dropped_and_benches_the_drafter() -> None:
    guard = GuardedDrafter(ThreadRecordingDrafter(propose_s=0.15), deadline_s=0.05, background=False, inline=True)
    _follow(guard, [b"x"])
    assert guard.propose(4).text == b""
    assert guard.failures.timed_out == 1 and not guard.available
    guard.begin(DraftContext(text=b"next"))
    assert guard.available
    guard.close()


def test_inline_and_background_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="inline"):
        GuardedDrafter(RecordingDrafter(), background=True, inline=True)


class LookupLikeDrafter(RecordingDrafter):
    """Text lookup's answer to ``may_propose``: whether the text so far ends in ``b"match"``."""

    sources = ("lookup",)

    def __init__(self) -> None:
        super().__init__()
        self.text = b""

    def begin(self, context: DraftContext) -> None:
        super().begin(context)
        self.text = context.text or b""

    def extend(self, committed: bytes) -> None:
        super().extend(committed)
        self.text += committed

    def may_propose(self) -> bool:
        return self.text.endswith(b"match")


def test_inline_text_lookup_catches_up_to_say_whether_it_may_propose() -> None:
    drafter = LookupLikeDrafter()
    guard = GuardedDrafter(drafter, background=False, inline=True)
    _follow(guard, [b"no "])
    assert not guard.may_propose()
    assert drafter.calls == [("begin", b"prompt"), ("extend", b"no ")]  # caught up, nothing prepared or proposed
    guard.extend(b"match")
    assert guard.may_propose()
    guard.close()


def test_a_model_is_taken_to_have_a_proposal_without_reading_the_text() -> None:
    """Making a model read the text to answer would cost what on-demand reading saves."""
    drafter = RecordingDrafter()  # lookup and model
    guard = GuardedDrafter(drafter, background=False, inline=True)
    _follow(guard, [b"a"])
    assert guard.may_propose() and drafter.calls == []
    guard.follow_only(())
    assert not guard.may_propose()
    guard.close()
