"""PNG charts of a ``ds4spec bench`` report (``--plot DIR``), drawn from the report's JSON form.

Four charts, always all four (a chart with no data says so, instead of being left out): tokens/s per
system and workload; acceptance per trigger event; the distribution of accepted tokens per verify pass;
the split of generation time between drafting, verifying and the rest. Drawing uses matplotlib's
``Figure`` directly with the Agg canvas, never pyplot, so no display or global figure state is involved.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

Report = Mapping[str, Any]
NO_EVENT = "none"  # how a cycle without a trigger event (``CycleReport.event == ""``) is labelled


def write_plots(report: Report, directory: Path) -> list[Path]:
    """Writes the four charts into ``directory`` (created if needed); returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    charts = (("tokens_per_second.png", _tokens_per_second), ("acceptance_by_event.png", _acceptance_by_event),
              ("accepted_length.png", _accepted_length), ("time_split.png", _time_split))
    paths = []
    for name, draw in charts:
        fig = Figure(figsize=(10, 5.5), layout="constrained")
        draw(fig.subplots(), report)
        path = directory / name
        fig.savefig(path, format="png", dpi=110)
        paths.append(path)
    return paths


def _empty(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, what, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _grouped_bars(ax: Axes, groups: Sequence[str], series: Mapping[str, Sequence[float]],
                  notes: Mapping[str, Sequence[str]] | None = None) -> None:
    """One cluster of bars per group, one bar per series in each cluster; ``notes`` label the bars (so that
    a bar of height zero still says what it is)."""
    width = 0.8 / max(len(series), 1)
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, values, width, label=label)
        if notes is not None:
            ax.bar_label(bars, labels=list(notes[label]), fontsize="x-small", padding=2)
    many = len(groups) > 6  # trigger events: long names side by side would overlap
    ax.set_xticks(range(len(groups)), list(groups), rotation=30 if many else 0, ha="right" if many else "center")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the bars, never on them


def _tokens_per_second(ax: Axes, report: Report) -> None:
    rows = report.get("systems") or [{"system": f"ds4spec {r['mode']}", **r} for r in report.get("rows", [])]
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    ran = [s for s in dict.fromkeys(r["system"] for r in rows)
           if any(r["system"] == s and r.get("tokens_per_second") for r in rows)]
    if not ran:
        return _empty(ax, "no system produced tokens")
    rate = {(r["workload"], r["system"]): r.get("tokens_per_second") or 0.0 for r in rows}
    series = {s: [rate.get((w, s), 0.0) for w in workloads] for s in ran}
    _grouped_bars(ax, workloads, series, {s: [f"{v:.1f}" for v in values] for s, values in series.items()})
    missing = [s for s in dict.fromkeys(r["system"] for r in rows) if s not in ran]
    ax.set_ylabel("tokens/s (greedy, prompt excluded)")
    title = "Tokens per second by system and workload"
    ax.set_title(title + (f"\nnot run: {', '.join(missing)}" if missing else ""))


def _acceptance_by_event(ax: Axes, report: Report) -> None:
    drafted: dict[tuple[str, str], int] = Counter()
    accepted: dict[tuple[str, str], int] = Counter()
    for c in report.get("cycles", []):
        for event, n in c["events"].items():
            key = (event or NO_EVENT, c["mode"])
            drafted[key] += n["drafted"]
            accepted[key] += n["accepted"]
    keys = [k for k in drafted if drafted[k]]
    if not keys:
        return _empty(ax, "no drafts were verified")
    events = sorted({e for e, _ in keys})
    modes = list(dict.fromkeys(m for _, m in keys))
    series = {m: [accepted[(e, m)] / drafted[(e, m)] if drafted[(e, m)] else 0.0 for e in events] for m in modes}
    notes = {m: [f"{accepted[(e, m)]}/{drafted[(e, m)]}" if drafted[(e, m)] else "" for e in events] for m in modes}
    _grouped_bars(ax, events, series, notes)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accepted / drafted tokens")
    ax.set_xlabel("trigger event that set the draft")
    ax.set_title("Acceptance per trigger event")


def _accepted_length(ax: Axes, report: Report) -> None:
    counts: dict[str, Counter[int]] = defaultdict(Counter)
    for c in report.get("cycles", []):
        for k, n in c["accepted_lengths"].items():
            counts[c["mode"]][int(k)] += n
    counts = {m: c for m, c in counts.items() if sum(c.values())}
    if not counts:
        return _empty(ax, "no verify pass carried a draft")
    longest = max(max(c) for c in counts.values())
    lengths = list(range(longest + 1))
    _grouped_bars(ax, [str(k) for k in lengths],
                  {f"{m} ({sum(c.values())} passes)": [c[k] / sum(c.values()) for k in lengths]
                   for m, c in counts.items()})
    ax.set_xlabel("draft tokens accepted in one verify pass")
    ax.set_ylabel("share of verify passes with a draft")
    ax.set_title("Accepted length per verify pass")


def _time_split(ax: Axes, report: Report) -> None:
    rows = [r for r in report.get("rows", []) if r.get("mode") != "plain" and r.get("seconds")]
    if not rows:
        return _empty(ax, "no speculative runs")
    labels = [f"{r['workload']} / {r['mode']}" for r in rows]
    draft = [r["draft_share"] for r in rows]
    verify = [r["verify_share"] for r in rows]
    other = [max(1.0 - d - v, 0.0) for d, v in zip(draft, verify, strict=True)]
    ys = range(len(rows))
    ax.barh(ys, draft, label="drafting (drafter and alignment)")
    # ds4spec counts every target pass of a speculative run as verifying, those with an empty draft too.
    ax.barh(ys, verify, left=draft, label="verifying (target passes)")
    ax.barh(ys, other, left=[d + v for d, v in zip(draft, verify, strict=True)], label="the rest")
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of generation time")
    ax.set_title("Where the time goes (ds4spec modes)")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=3)
