"""Lookup when it has a match, the model otherwise.

A lookup draft costs nothing and, when the answer copies its input, is long and right; a model draft costs the
drafter's forward passes but does not need the text to repeat. Asking lookup first spends the model only where
copying has nothing to offer.
"""

from __future__ import annotations

from ds4spec.core.drafting import NO_DRAFT, Draft, DraftContext, Drafter, Enough, Worth


class HybridDrafter(Drafter):
    """Lookup when it has a match, the model otherwise.

    Both sub-drafters see every ``begin`` and ``extend``, also while lookup is the one proposing: the model's
    ``extend`` is incremental and cheap, and a model that fell behind would have to re-read the whole text the
    first time lookup has nothing. Unless the model will never be asked (``follow_only``): then it is left alone,
    and every draft is lookup's.
    """

    def __init__(self, lookup: Drafter, model: Drafter) -> None:
        self.lookup = lookup
        self.model = model
        self.name = f"hybrid({lookup.name}+{model.name})"
        self.sources = ("lookup", "model")
        self._model_asked = True
        self._model_follows = True  # in this generation: what _model_asked was at its begin

    def follow_only(self, sources: tuple[str, ...]) -> None:
        """Without ``model`` among ``sources``, the model stops following the text (from the next ``begin``)."""
        self._model_asked = "model" in sources

    def begin(self, context: DraftContext) -> None:
        """Starts both sub-drafters on the same context (lookup alone when the model is never asked)."""
        self.lookup.begin(context)
        self._model_follows = self._model_asked
        if self._model_follows:
            self.model.begin(context)

    def extend(self, committed: bytes) -> None:
        """Keeps both sub-drafters in step with the committed text."""
        self.lookup.extend(committed)
        if self._model_follows:
            self.model.extend(committed)

    def may_propose(self) -> bool:
        """The model can always try; left alone, lookup alone says."""
        return self._model_follows or self.lookup.may_propose()

    def prepare(self, source: str = "any") -> None:
        """The model reads the text when it will be asked: for ``model``, and for ``any`` when lookup has no match
        (asking lookup costs nothing; the model's first read of a long prompt costs a second on a CPU, and measured
        on the F16 pair's edits, reads that lookup's match then made useless took 30% of the time)."""
        if not self._model_follows:
            return
        if source == "model" or (source == "any" and not self.lookup.propose(1).text):
            self.model.prepare()

    def propose(self, max_tokens: int) -> Draft:
        """The lookup draft when it has one (its ``source`` says so), else the model's."""
        draft = self.lookup.propose(max_tokens)
        if draft.text:
            return draft
        if not self._model_follows:
            return NO_DRAFT
        draft = self.model.propose(max_tokens)
        return draft if draft.text else NO_DRAFT

    def propose_from(self, source: str, max_tokens: int) -> Draft:
        """Only lookup's draft, or only the model's (a trigger rule's choice); ``hybrid``: as ``propose``."""
        if source == "lookup":
            return self.lookup.propose(max_tokens)
        if source == "model":
            return self.model.propose(max_tokens) if self._model_follows else NO_DRAFT
        return self.propose(max_tokens)

    def propose_until(self, max_tokens: int, enough: Enough, source: str = "any", worth: Worth | None = None) -> Draft:
        """As ``propose_from``, the model stopping once ``enough`` or where ``worth`` says (lookup's drafts cost
        nothing)."""
        if source == "lookup":
            return self.lookup.propose(max_tokens)
        if source == "any" and (draft := self.lookup.propose(max_tokens)).text:
            return draft
        if not self._model_follows:
            return NO_DRAFT
        draft = self.model.propose_until(max_tokens, enough, worth=worth)
        return draft if draft.text else NO_DRAFT

    def close(self) -> None:
        """Closes both, the model even when closing lookup fails."""
        try:
            self.lookup.close()
        finally:
            self.model.close()
