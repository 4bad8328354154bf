"""``--html FILE``: one self-contained page of what happened, for people rather than programs.

Per chaos run, one figure of stacked panels sharing a time axis (seconds since the run's start), with
every fault window shaded and labelled in all of them:

1. the controller epoch, a step at each election, annotated with the winner;
2. one swimlane per partition, coloured by its leader (grey: no leader), with the ISR size written
   where it changes;
3. produce latency, p50 and p99 per second (log scale);
4. throughput: acknowledged records per second.

Before the runs, for a directory of several (a night of CI), two tables across them: one row per run
(its faults, records, losses and produce p99), and one per fault kind (its reaction-time figures over
every run, ``pipeline.availability.BY_FAULT``). After them, control-request latency (queue plus
handling) as histograms by API, one panel per plane, and the checks: one row per check, linked to its
examples in full. Plots are PNGs embedded as data URIs, so
the file opens anywhere without a network. matplotlib draws them with its non-interactive backend.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.text import phrase, plural
from pipeline.timeline import BINS_PER_DECADE, RunTimeline, Timelines

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FAULT_COLOURS = {
    "kill": "#d62728",
    "bounce": "#ff7f0e",
    "restart": "#bcbd22",
    "pause": "#9467bd",
}
OTHER_FAULT_COLOUR = "#17becf"
VERDICT_COLOURS = {"passed": "#2ca02c", "failed": "#d62728", "skipped": "#b8860b"}
MAX_SWIMLANES = 24
"""Partitions drawn per run; a run over more topics shows the first ones and says so."""


def write_html(report: dict[str, Any], data: Timelines, path: Path) -> None:
    """Render the page and write it atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page(report, data), encoding="utf-8")
    tmp.replace(path)


def page(report: dict[str, Any], data: Timelines) -> str:
    passed = "every check passed" if report["passed"] else "a check failed"
    failed = sum(c["verdict"] == "failed" for c in report["checks"])
    sections = [
        f"<h1>Audit of {_e(report['directory'])}</h1>",
        f"<p class=summary>{_e(passed)}: {plural(len(report['checks']), 'check')}, "
        f"{failed} failed; {plural(len(data.runs), 'chaos run')}; generated {_e(report['generated_at'])}</p>",
        _checks_table(report),
        _across_runs(report),
    ]
    for run in data.runs:
        sections.append(f"<h2 id='{_e(run.run)}'>Run {_e(run.run)}</h2>")
        sections.append(_run_caption(run, report))
        sections.append(_img(run_figure(run), f"timeline of {run.run}"))
    if data.control_latency:
        sections.append("<h2>Control-request latency</h2>")
        sections.append(
            "<p>Queue plus handling time of every control request the brokers handled, by API; the "
            "control plane is a broker's own controller listener (KIP-291), the data plane the queue "
            "it shares with clients.</p>"
        )
        sections.append(_img(latency_figure(data.control_latency), "control-request latency histograms"))
    sections.append(_examples(report))
    return STYLE_HEAD + "\n".join(sections) + "\n</body></html>\n"


STYLE_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Audit</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: left; }
td.n { text-align: right; }
img { max-width: 100%; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; }
.summary { font-size: 1.1em; }
</style></head><body>
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _checks_table(report: dict[str, Any]) -> str:
    rows = []
    for check in report["checks"]:
        colour = VERDICT_COLOURS[check["verdict"]]
        first = check["examples"][0] if check["examples"] else check["details"].get("skipped", "")
        link = f"<a href='#check-{_e(check['name'])}'>{_e(phrase(first))}</a>" if first else ""
        rows.append(
            f"<tr><td>{_e(check['name'])}</td><td style='color:{colour}'>{_e(check['verdict'])}</td>"
            f"<td class=n>{check['checked']}</td><td class=n>{check['violations']}</td><td>{link}</td></tr>"
        )
    head = "<tr><th>check</th><th>verdict</th><th>checked</th><th>violations</th><th>first example</th></tr>"
    return f"<h2>Checks</h2><table class=checks>{head}{''.join(rows)}</table>"


def _across_runs(report: dict[str, Any]) -> str:
    """The runs side by side, and the reaction times per fault kind; nothing for a single run."""
    summary = report.get("summary", {})
    if summary.get("runs", 0) < 2 and len(summary.get("clusters", [])) < 2:
        return ""
    rows = [
        f"<tr><td><a href='#{_e(name)}'>{_e(name)}</a></td><td class=n>{run['faults']}</td>"
        f"<td class=n>{run['acked']}</td><td class=n>{run['failed']}</td><td class=n>{run['lost']}</td>"
        f"<td class=n>{_e(run['produce_p99_ms'] if run['produce_p99_ms'] is not None else '')}</td></tr>"
        for name, run in summary.get("by_run", {}).items()
    ]
    columns = ("run", "faults", "acked", "failed", "lost", "produce p99, ms")
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    parts = [
        f"<h2>Across runs</h2><p>{plural(summary['runs'], 'chaos run')} in "
        f"{plural(len(summary['clusters']), 'cluster')}</p><table class=runs>{head}{''.join(rows)}</table>"
    ]
    by_fault = summary.get("by_fault", {})
    if by_fault:
        figures = sorted({f for kind in by_fault.values() for f in kind})
        head = (
            "<tr><th>fault</th>" + "".join(f"<th>{_e(f)}<br>n, p50, p99, max</th>" for f in figures) + "</tr>"
        )
        body = []
        for kind, keyed in by_fault.items():
            cells = []
            for figure in figures:
                q = keyed.get(figure)
                cells.append(
                    f"<td class=n>{q['count']}, {q['p50']:g}, {q['p99']:g}, {q['max']:g}</td>"
                    if q
                    else "<td></td>"
                )
            body.append(f"<tr><td>{_e(kind)}</td>{''.join(cells)}</tr>")
        parts.append(
            f"<h3>Per fault kind, over every run</h3><table class=faults>{head}{''.join(body)}</table>"
        )
    return "\n".join(parts)


def _examples(report: dict[str, Any]) -> str:
    parts = ["<h2>Examples and details</h2>"]
    for check in report["checks"]:
        body = json.dumps({"examples": check["examples"], "details": check["details"]}, indent=2)
        parts.append(f"<h3 id='check-{_e(check['name'])}'>{_e(check['name'])}</h3><pre>{_e(body)}</pre>")
    return "\n".join(parts)


def _run_caption(run: RunTimeline, report: dict[str, Any]) -> str:
    stats = report.get("stats", {}).get("runs", {}).get(run.run, {})
    faults = ", ".join(f"{n} {k}" for k, n in sorted(stats.get("faults", {}).items())) or "no fault"
    seconds = (run.end - run.start).total_seconds()
    reacted = [
        f"{kind}: first election after {figure['p50']:g} s (p50), {figure['max']:g} s at most"
        for kind, figure in sorted(stats.get("availability", {}).get("fault_to_first_election_s", {}).items())
    ]
    return (
        f"<p>{seconds:.0f} s from {_e(run.start.isoformat())}; {_e(faults)}; "
        f"{plural(stats.get('acked', 0), 'record')} acknowledged, {stats.get('failed', 0)} failed"
        f"{'; ' + _e('; '.join(reacted)) if reacted else ''}</p>"
    )


def _img(figure: Figure, alt: str) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(figure)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<p><img alt='{_e(alt)}' src='data:image/png;base64,{data}'></p>"


def _seconds(at: dt.datetime, start: dt.datetime) -> float:
    return (at - start).total_seconds()


def run_figure(run: RunTimeline) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lanes = _lanes(run)
    lane_height = max(1.5, 0.28 * len(lanes))
    figure, axes = plt.subplots(
        4, 1, sharex=True, figsize=(12, 3 * 2.2 + lane_height), height_ratios=[1, lane_height / 2.2, 1, 1]
    )
    span = max(_seconds(run.end, run.start), 1.0)
    _controller_panel(axes[0], run)
    _swimlanes(axes[1], run, lanes)
    _produce_panels(axes[2], axes[3], run)
    for ax in axes:
        _shade_faults(ax, run, label=ax is axes[0])
        ax.set_xlim(0, span)
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel(f"seconds since the run started ({run.start:%Y-%m-%d %H:%M:%S} UTC)")
    figure.suptitle(run.run, x=0.01, ha="left")
    return figure


def _shade_faults(ax: Axes, run: RunTimeline, *, label: bool) -> None:
    for fault in run.faults:
        colour = FAULT_COLOURS.get(fault["fault"], OTHER_FAULT_COLOUR)
        start, end = _seconds(fault["start"], run.start), _seconds(fault["end"], run.start)
        ax.axvspan(start, max(end, start + 0.2), color=colour, alpha=0.15, lw=0)
        if label:
            ax.annotate(
                f"{fault['fault']} {fault['target']}",
                (start, 1.0),
                xycoords=("data", "axes fraction"),
                fontsize=7,
                rotation=30,
                va="bottom",
                color=colour,
            )


def _controller_panel(ax: Axes, run: RunTimeline) -> None:
    from matplotlib.ticker import MaxNLocator

    elections = sorted(run.elections, key=lambda e: e["ts"])
    if not elections:
        ax.text(0.5, 0.5, "no controller election in the logs", transform=ax.transAxes, ha="center")
        ax.set_ylabel("controller\nepoch")
        return
    xs = [max(_seconds(e["ts"], run.start), 0.0) for e in elections]
    ys = [e["controller_epoch"] for e in elections]
    ax.step([*xs, _seconds(run.end, run.start)], [*ys, ys[-1]], where="post", color="#1f77b4")
    before = [i for i, x in enumerate(xs) if x == 0]  # clamped to the start: the last was active then
    for i, (x, e) in enumerate(zip(xs, elections, strict=True)):
        if x > 0 or (before and i == before[-1]):
            at = (x, e["controller_epoch"])
            ax.annotate(e["node"], at, fontsize=7, xytext=(2, 2), textcoords="offset points")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("controller\nepoch")


def _lanes(run: RunTimeline) -> list[tuple[str, int]]:
    """The partitions drawn: the workload's topics before internal ones (``__consumer_offsets``)."""
    names = {(p["topic"], p["partition"]) for p in run.partitions}
    return sorted(names, key=lambda name: (name[0].startswith("__"), name))[:MAX_SWIMLANES]


def _swimlanes(ax: Axes, run: RunTimeline, lanes: list[tuple[str, int]]) -> None:
    import matplotlib.pyplot as plt

    by_lane: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for write in sorted(run.partitions, key=lambda p: p["ts"]):
        by_lane[(write["topic"], write["partition"])].append(write)
    leaders = sorted({w["leader"] for w in run.partitions if w["leader"] is not None and w["leader"] >= 0})
    palette = plt.get_cmap("tab10")
    colour = {leader: palette(i % 10) for i, leader in enumerate(leaders)}
    end = _seconds(run.end, run.start)
    for row, lane in enumerate(lanes):
        writes = by_lane[lane]
        for i, write in enumerate(writes):
            x0 = max(_seconds(write["ts"], run.start), 0.0)
            x1 = _seconds(writes[i + 1]["ts"], run.start) if i + 1 < len(writes) else end
            leader = write["leader"]
            ax.broken_barh(
                [(x0, max(x1 - x0, 0.05))], (row - 0.4, 0.8), color=colour.get(leader, "#bbbbbb"), alpha=0.8
            )
            if i == 0 or write["isr_size"] != writes[i - 1]["isr_size"]:
                ax.text(x0 + 0.1, row, str(write["isr_size"]), fontsize=6, va="center")
    ax.set_yticks(range(len(lanes)), [f"{t}-{p}" for t, p in lanes], fontsize=7)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[b]) for b in leaders]
    if handles:
        ax.legend(handles, [f"leader {b}" for b in leaders], fontsize=7, loc="upper right", ncol=len(handles))
    ax.set_ylabel("partition\n(ISR size)")


def _produce_panels(latency: Axes, throughput: Axes, run: RunTimeline) -> None:
    start_s = run.start.timestamp()
    xs = [p["second"] - start_s for p in run.produce]
    if xs:
        latency.plot(xs, [p["p50"] for p in run.produce], label="p50", color="#2ca02c", lw=1)
        latency.plot(xs, [p["p99"] for p in run.produce], label="p99", color="#d62728", lw=1)
        latency.set_yscale("log")
        latency.legend(fontsize=7, loc="upper right")
        throughput.plot(xs, [p["acked"] for p in run.produce], color="#1f77b4", lw=1)
    else:
        latency.text(0.5, 0.5, "no acknowledged record", transform=latency.transAxes, ha="center")
    latency.set_ylabel("produce\nlatency (ms)")
    throughput.set_ylabel("acked\nper second")


def latency_figure(histogram: list[dict[str, Any]]) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    planes = sorted({row["plane"] for row in histogram})
    figure, axes = plt.subplots(1, len(planes), figsize=(6 * len(planes), 3.5), squeeze=False, sharey=True)
    for ax, plane in zip(axes[0], planes, strict=True):
        by_api: dict[str, list[tuple[float, int]]] = defaultdict(list)
        for row in histogram:
            if row["plane"] == plane:
                by_api[row["api"]].append((row["bin_ms"], row["count"]))
        widen = 10 ** (1 / BINS_PER_DECADE)
        for api, bins in sorted(by_api.items()):
            edges = [b for b, _ in bins]
            widths = [b * (widen - 1) for b in edges]
            ax.bar(edges, [c for _, c in bins], width=widths, align="edge", alpha=0.55, label=api)
        ax.set_xscale("log")
        ax.set_title(f"{plane} plane")
        ax.set_xlabel("queue + handling (ms)")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("requests")
    return figure
