"""HTML report printer: report data -> one self-contained HTML page.

Input: the dict of ``colc.compiler.report_data.gather_report`` (topology
summary, bounds, schedules, curves, portfolio windows, notes).  Output: the
text of an HTML page (``templates/report.html.j2``, jinja2 with autoescape
on) whose plots are inline SVG drawn here: algbw on a log10 y axis against
message size on a log2 x axis, one ``<polyline>`` per series, a filled
marker per point (open where the runtime would not select the file).  No external
script, style sheet or font (a Content-Security-Policy forbids loading any);
a small inline script counts the plots and their polylines into
``document.body.dataset`` (``plots``, ``lines``, ``ok``) for headless checks.

Backends only print: every series, label and number comes from the data;
this module decides nothing but geometry and number formatting.
Deterministic: the same data gives the same bytes.
"""

from __future__ import annotations

import functools
import math
import os

import jinja2

from colc.sizes import format_size

#: Plot canvas and margins (SVG user units).
WIDTH, HEIGHT = 720, 380
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 20, 50
#: Line colours of algorithm series, in series order (cycled).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22")
#: Stroke of the special series kinds: (colour, width, dash pattern).
KIND_STYLE = {"bound": ("#7f7f7f", 2, "6 4"), "portfolio": ("#000000", 3, "")}
#: At most this many labelled ticks on the size axis.
MAX_X_LABELS = 12


def render_report(data: dict) -> str:
    """Print the report page.

    Parameters
    ----------
    data : dict
        As returned by ``colc.compiler.report_data.gather_report``.

    Returns
    -------
    str
        The HTML text, ending with a newline.

    Examples
    --------
    >>> page = render_report({"title": "t", "topology": {"name": "t", "ranks": 2, "nodes": 2,
    ...     "switches": 0, "links": 2, "boxes": 1, "box_ranks": "1 x 2", "machine": "generic",
    ...     "budget": 32},
    ...     "collective": "allgather", "sizes": [1024], "simulated": True, "bounds": [],
    ...     "schedules": [], "plots": [], "portfolio": None, "notes": ["a<b"]})
    >>> page.startswith("<!DOCTYPE html>"), "a&lt;b" in page
    (True, True)
    """
    plots = [_plot_geometry(p) for p in data["plots"]]
    text = _environment().get_template("report.html.j2").render(data=data, plots=plots)
    return text if text.endswith("\n") else text + "\n"


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["size"] = format_size
    env.filters["gbps"] = _gbps
    env.filters["num"] = _num
    return env


def _gbps(value: float | None) -> str:
    """GB/s with two decimals (three significant digits below 0.1)."""
    if value is None:
        return ""
    return f"{value:.2f}" if value >= 0.1 or value == 0 else f"{value:.3g}"


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _plot_geometry(plot: dict) -> dict:
    """Axis ticks and screen coordinates of one plot (log2 x, log10 y)."""
    points = [pt for s in plot["series"] for pt in s["points"]]
    xs = [math.log2(p[0]) for p in points] or [0.0]
    ys = [math.log10(p[1]) for p in points] or [0.0]
    x_lo, x_hi = math.floor(min(xs)), math.ceil(max(xs))
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_lo, y_hi = math.floor(min(ys)), math.ceil(max(ys))
    if y_hi == y_lo:
        y_hi = y_lo + 1
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(lx: float) -> float:
        return LEFT + (lx - x_lo) / (x_hi - x_lo) * inner_w

    def sy(ly: float) -> float:
        return TOP + inner_h - (ly - y_lo) / (y_hi - y_lo) * inner_h

    stride = max(1, math.ceil((x_hi - x_lo + 1) / MAX_X_LABELS))
    x_ticks = [{"pos": _c(sx(k)), "label": format_size(1 << k) if k >= 0 else "",
                "major": (k - x_lo) % stride == 0} for k in range(x_lo, x_hi + 1)]
    y_ticks = []
    minors = (2, 5) if y_hi - y_lo <= 3 else ()
    for k in range(y_lo, y_hi + 1):
        y_ticks.append({"pos": _c(sy(k)), "label": f"{10.0 ** k:g}", "major": True})
        for m in minors if k < y_hi else ():
            y_ticks.append({"pos": _c(sy(k + math.log10(m))), "label": f"{m * 10.0 ** k:g}",
                            "major": False})
    series = []
    algo = 0
    for s in plot["series"]:
        if s["kind"] in KIND_STYLE:
            colour, width, dash = KIND_STYLE[s["kind"]]
        else:
            colour, width, dash = PALETTE[algo % len(PALETTE)], 2, ""
            algo += 1
        marks = [{"x": _c(sx(math.log2(size))), "y": _c(sy(math.log10(bw))),
                  "selected": selected,
                  "title": f"{s['label']}: {format_size(size)} {_gbps(bw)} GB/s"
                           + ("" if selected else " (not selected by the runtime)")}
                 for size, bw, selected in s["points"]]
        series.append({"label": s["label"], "kind": s["kind"], "colour": colour,
                       "width": width, "dash": dash,
                       "points": " ".join(f"{m['x']},{m['y']}" for m in marks),
                       "marks": marks})
    return {"collective": plot["collective"], "title": plot["title"], "width": WIDTH,
            "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT, "top": TOP,
            "bottom": HEIGHT - BOTTOM, "x_ticks": x_ticks, "y_ticks": y_ticks,
            "x_label_y": HEIGHT - BOTTOM + 18, "x_title_y": HEIGHT - 8,
            "y_title_x": 16, "y_title_y": _c(TOP + inner_h / 2), "series": series}


def _c(value: float) -> str:
    """A screen coordinate, one decimal (stable text)."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


__all__ = ["render_report"]
