"""Lookup when it has a match, the model otherwise.

A lookup draft costs nothing and, when the answer copies its input, is long and right; a model draft costs the
drafter's forward passes but does not need the text to repeat. Asking lookup first spends the model only where
copying has nothing to offer.

Outside a long copy of the prompt, though, lookup's matches are mostly wrong where the answer writes new code: on
HumanEval prompts tuning never saw (F32 pair, run 79), 26 of the triggers' 31 lookup drafts on code and comment lines
were rejected at their first token (``return string`` went on with `` == string[::-1]`` of another function), where
the model's drafts there kept half their tokens. Where the model is cheap, a ``checked`` draft is lookup's only if
the model's own first bytes (``CHECK_BYTES``) agree with it, and the model's draft otherwise.
"""

from __future__ import annotations

from ds4spec.core.drafting import CHECKED, NO_DRAFT, Draft, DraftContext, Drafter, Enough, Worth

CHECK_BYTES = 4  # of lookup's draft (all of a shorter one) the model must write the same to agree: ` the`, `):\n`


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
        if source in ("model", CHECKED) or (source == "any" and not self.lookup.propose(1).text):
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
        copy = self.lookup.propose(max_tokens) if source in ("any", CHECKED) else NO_DRAFT
        if copy.text and (source == "any" or not self._model_follows):
            return copy
        if not self._model_follows:
            return NO_DRAFT
        if copy.text:
            return self._checked(copy, max_tokens, enough, worth)
        draft = self.model.propose_until(max_tokens, enough, worth=worth)
        return draft if draft.text else NO_DRAFT

    def _checked(self, copy: Draft, max_tokens: int, enough: Enough, worth: Worth | None) -> Draft:
        """Lookup's ``copy`` where the model's first bytes are the same (it stops there), else the model's own draft;
        the copy too where the model offers nothing (unsure of its first token, it says nothing against it)."""
        agrees: list[bool] = []

        def checked(text: bytes) -> bool:
            if not agrees and text:
                n = min(len(text), len(copy.text))
                if text[:n] != copy.text[:n]:
                    agrees.append(False)
                elif n >= min(CHECK_BYTES, len(copy.text)):
                    agrees.append(True)
                    return True
            return enough(text)

        draft = self.model.propose_until(max_tokens, checked, worth=worth)
        return draft if draft.text and agrees == [False] else copy

    def close(self) -> None:
        """Closes both, the model even when closing lookup fails."""
        try:
            self.lookup.close()
        finally:
            self.model.close()
