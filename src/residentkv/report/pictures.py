"""Pictures for reading: the capacity sweep as a policy x capacity grid, and traces as
timelines. matplotlib (the ``[plot]`` extra) is imported only inside these functions; without it
they raise ImportError and the caller says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from residentkv.microruntime.sweep import SweepResult
from residentkv.report.timeline import CATEGORY_COLOURS, event_label

#: colour of the active request's outcome in the sweep grid
OUTCOME_COLOURS = {"served": "#cfe8d5", "deferred": "#fde3b0", "refused": "#f6c3bd"}


def _figure(width: float, height: float) -> Any:
    # Optional extra, imported only here; mypy may run without it installed.
    from matplotlib.figure import Figure  # type: ignore[import-not-found,unused-ignore]

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig: Any, paths: Sequence[Path]) -> list[Path]:
    import matplotlib  # type: ignore[import-not-found,unused-ignore]

    # SVG keeps its text as text: searchable, selectable, and checkable in tests
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(p, dpi=150)
    return list(paths)


def _cell_text(row: Any) -> str:
    lines = [f"{row.resident_victims} lost" if row.resident_victims else "0 lost"]
    if row.active == "refused":
        lines.append(f"refused, short {row.shortfall}" if row.shortfall is not None
                     else "refused")
    elif row.active == "deferred":
        lines.append("deferred")
    if row.blocking_claim_ids:
        lines.append("by " + ", ".join(row.blocking_claim_ids))
    if row.harmed_claims:
        lines.append("harm: " + ", ".join(row.harmed_claims))
    return "\n".join(lines)


def sweep_grid(result: SweepResult, out_dir: Path) -> list[Path]:
    """``sweep.png`` and ``sweep.svg``: policies x usable blocks, colour = the active
    request's outcome, text = resident blocks lost (and shortfall / blocking claim), a line
    where the pool holds resident + active."""
    from matplotlib.patches import Patch  # type: ignore[import-not-found,unused-ignore]

    policies = list(dict.fromkeys(r.policy for r in result.rows))
    usables = sorted({r.usable for r in result.rows})
    cell = {(r.policy, r.usable): r for r in result.rows}
    fig = _figure(1.25 * len(usables) + 2.6, 0.72 * len(policies) + 1.9)
    ax = fig.subplots()
    for yi, policy in enumerate(policies):
        for xi, usable in enumerate(usables):
            row = cell.get((policy, usable))
            if row is None:
                continue
            ax.add_patch(_rect(xi, yi, OUTCOME_COLOURS[row.active]))
            lost = row.resident_victims > 0
            ax.text(xi, yi, _cell_text(row), ha="center", va="center", fontsize=7.2,
                    color="#8b1a12" if lost else "#1d1d1f",
                    fontweight="bold" if lost else "normal")
    need = result.resident + result.active
    fits = [i for i, u in enumerate(usables) if u >= need]
    if fits:
        x = fits[0] - 0.5
        ax.axvline(x, color="#1d1d1f", linestyle="--", linewidth=1.4)
        ax.text(x + 0.06, -0.62, f"resident + active = {need} blocks fit from here",
                fontsize=8, va="bottom")
    ax.set_xlim(-0.5, len(usables) - 0.5)
    ax.set_ylim(len(policies) - 0.5, -0.75)
    ax.set_xticks(range(len(usables)), [str(u) for u in usables])
    ax.set_yticks(range(len(policies)), policies)
    ax.set_xlabel("usable blocks in the pool")
    ax.tick_params(length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"Capacity sweep: resident claim {result.resident} blocks, then an active "
                 f"prefill of {result.active} blocks\ncell colour = the active request's "
                 "outcome; text = resident blocks lost (read from each run's trace)",
                 fontsize=10)
    handles = [Patch(facecolor=c, edgecolor="#888", label=k) for k, c in OUTCOME_COLOURS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8,
               title="active request", title_fontsize=8)
    return _save(fig, [out_dir / "sweep.png", out_dir / "sweep.svg"])


def _rect(x: int, y: int, colour: str) -> Any:
    from matplotlib.patches import Rectangle  # type: ignore[import-not-found,unused-ignore]

    return Rectangle((x - 0.48, y - 0.46), 0.96, 0.92, facecolor=colour, edgecolor="white",
                     linewidth=1.5)


def timeline_picture(timelines: Sequence[dict[str, Any]], path: Path) -> Path:
    """Traces as timelines, one panel each: a lane per request, events in seq order, colour =
    category, each failure linked to the outcome it became; claim events are labelled."""
    from matplotlib.lines import Line2D  # type: ignore[import-not-found,unused-ignore]

    heights = [max(len(t["lanes"]), 1) * 0.55 + 1.3 for t in timelines]
    width = max(9.0, min(16.0, 0.3 * max((len(t["events"]) for t in timelines), default=1)
                         + 3.5))
    fig = _figure(width, sum(heights) + 0.6)
    axes = fig.subplots(len(timelines), 1, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, t in zip(axes, timelines, strict=True):
        _timeline_panel(ax, t)
    handles = [Line2D([], [], marker="o", linestyle="", color=c, label=k)
               for k, c in CATEGORY_COLOURS.items() if k != "other"]
    handles.append(Line2D([], [], color=CATEGORY_COLOURS["failure"], linestyle="--",
                          label="failure → outcome"))
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8)
    return _save(fig, [path])[0]


def _timeline_panel(ax: Any, t: dict[str, Any]) -> None:
    events, lanes = t["events"], t["lanes"]
    x = {e["seq"]: i for i, e in enumerate(events)}
    y = {lane: i for i, lane in enumerate(lanes)}
    for lane, ly in y.items():
        xs = [x[e["seq"]] for e in events if e["request"] == lane]
        if xs:
            ax.plot([min(xs), max(xs)], [ly, ly], color="#d3d3da", linewidth=5,
                    solid_capstyle="round", zorder=1)
    for e in events:
        cat = e["category"]
        big = cat in ("failure", "outcome")
        ax.scatter(x[e["seq"]], y[e["request"]], s=70 if big else 30, zorder=3,
                   color=CATEGORY_COLOURS.get(cat, CATEGORY_COLOURS["other"]))
        if cat in ("claim", "failure", "outcome", "loss"):
            label = event_label(e)
            ax.annotate(label, (x[e["seq"]], y[e["request"]]), xytext=(3, -7),
                        textcoords="offset points", rotation=-35, fontsize=6.5,
                        rotation_mode="anchor", color=CATEGORY_COLOURS[cat])
    for link in t["links"]:
        a = next(e for e in events if e["seq"] == link["from"])
        b = next(e for e in events if e["seq"] == link["to"])
        ax.annotate("", xy=(x[b["seq"]], y[b["request"]] - 0.12),
                    xytext=(x[a["seq"]], y[a["request"]] - 0.12),
                    arrowprops={"arrowstyle": "->", "color": CATEGORY_COLOURS["failure"],
                                "linestyle": "--", "connectionstyle": "arc3,rad=-0.5"})
    ax.set_yticks(range(len(lanes)), lanes, fontsize=7)
    ax.set_ylim(len(lanes) - 0.2, -0.9)
    ax.set_xlim(-0.8, max(len(events), 1) + 2.5)
    ax.set_xticks([])
    claims = sorted({e["claim"] for e in events if e["claim"]})
    ax.set_title(f"{t['name']}: {len(events)} events, claims {', '.join(claims) or '(none)'}",
                 fontsize=9, loc="left")
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
