"""Runs `ds4spec bench` with two more modes, `pair-nostop` and `triggers-nostop`: the pair and the triggers with
the confidence stop off (``--no-confidence-stop``), each with its own drafter and learning, so that the stop is
measured against drafts that run to the length asked for in one run, prompt by prompt (a measuring aid, not part of
the product). Usage, from the repository root:

    .venv/bin/python docs/bench/cpu/ab_confidence_stop.py bench --pair f32 --workload humaneval --limit 5 \\
        --mode pair --mode pair-nostop --mode triggers --mode triggers-nostop
"""

from __future__ import annotations

import sys

import ds4spec.bench.modes as modes
from ds4spec.cli import main

for mode in ("pair", "triggers"):
    modes.MODE_SETTINGS[f"{mode}-nostop"] = {**modes.MODE_SETTINGS[mode], "confidence_stop": False}
sys.exit(main(sys.argv[1:]))
