"""Line charts as inline SVG, drawn on the server: no plotting library, no script, nothing
fetched. One chart is a few series of (x, y) points over a shared x axis (iterations)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

#: Series colours, one per run or per curve (colour-blind safe, Okabe-Ito).
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000",
           "#f0e442")
DASHES = ("", "5 3", "2 2", "8 3 2 3")

W, H = 360, 190
LEFT, RIGHT, TOP, BOTTOM = 46, 8, 8, 22


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e4 or a < 1e-3:
        return f"{v:.1e}"
    return f"{v:.3g}"


def line_chart(chart_id: str, series: Sequence[tuple[str, Sequence[tuple[float, float]], int]],
               *, y_from_zero: bool = False) -> str:
    """An SVG of ``series``: each ``(label, points, style)`` with ``style`` choosing colour and
    dash (runs differ in colour, curves of one run in dash). Points whose y is not finite are
    skipped. Each polyline carries ``data-points`` (its number of points) and ``data-label``."""
    finite = [[(float(x), float(y)) for x, y in pts if math.isfinite(y) and math.isfinite(x)]
              for _, pts, _ in series]
    xs = [x for pts in finite for x, _ in pts]
    ys = [y for pts in finite for _, y in pts]
    out = [f'<svg id="{escape(chart_id)}" class="chart" viewBox="0 0 {W} {H}" '
           f'width="{W}" height="{H}" role="img" xmlns="http://www.w3.org/2000/svg">']
    if not xs:
        out.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" class="nodata">'
                   "not recorded in this run</text></svg>")
        return "".join(out)
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if y_from_zero:
        y0 = min(y0, 0.0)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        pad = abs(y0) * 0.1 or 1.0
        y0, y1 = y0 - pad, y1 + pad
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return TOP + (1 - (y - y0) / (y1 - y0)) * ph

    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" class="frame"/>')
    for t in _ticks(y0, y1):
        y = py(t)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'class="grid"/><text x="{LEFT - 3}" y="{y + 3:.1f}" text-anchor="end" '
                   f'class="tick">{_fmt(t)}</text>')
    for t in _ticks(x0, x1):
        x = px(t)
        out.append(f'<text x="{x:.1f}" y="{H - 6}" text-anchor="middle" class="tick">'
                   f"{_fmt(t)}</text>")
    for (label, _, style), pts in zip(series, finite, strict=True):
        colour = PALETTE[style // len(DASHES) % len(PALETTE)]
        dash = DASHES[style % len(DASHES)]
        attrs = (f'stroke="{colour}" data-label="{escape(label)}" data-points="{len(pts)}"'
                 + (f' stroke-dasharray="{dash}"' if dash else ""))
        if len(pts) == 1:
            (x, y), = pts
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}" '
                       f'class="series" {attrs}><title>{escape(label)}: {_fmt(y)}</title>'
                       "</circle>")
            continue
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke-width="1.5" class="series" '
                   f"{attrs}><title>{escape(label)}</title></polyline>")
    out.append("</svg>")
    return "".join(out)
