"""Policies: whether to draft, from which source and how far, from measured costs (``gate``, ``triggers``),
the syntax events and rules the triggers follow (``syntax``, ``rules``), and the measurements they start from
(``profile``: the target's verify cost; ``costs``: the drafters'; ``memory``: what earlier runs learned)."""
