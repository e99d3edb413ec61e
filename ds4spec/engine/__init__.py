"""The engine: settings (``settings``, ``options``), loading a target and a drafter from them (``loading``),
and the ``Engine`` that wires target, drafter and policy and turns a prompt into events (``engine``)."""
