"""The dashboard's plots as inline SVG, drawn on the server from `mem.insight`'s numbers.

No chart library and no script: a plot is a few rectangles and labels, so it paints with the page,
obeys the Content-Security-Policy (no inline style: colours are classes of ui.css, which also
follows the dark mode) and reads the same without JavaScript. Every label is escaped (a category
or a memory's text is stored text). Each plot carries a title and description for screen readers.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from markupsafe import Markup, escape

PALETTE = 10  # ui.css defines .c0 … .c9
WIDTH = 640


def _svg(title: str, height: int, body: str, desc: str) -> Markup:
    return Markup(
        f'<svg class="plot" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title><desc>{escape(desc)}</desc>{body}</svg>"
    )


def bars(title: str, items: Sequence[tuple[str, float]], *, unit: str = "", limit: float | None = None) -> Markup:
    """Horizontal bars of one colour, one per (label, value), to scale (`limit`: the scale's end, e.g. 100 %)."""
    if not items:
        return Markup("")
    top = limit or max(v for _, v in items) or 1
    row, label_w = 24, 230
    body = []
    for i, (label, value) in enumerate(items):
        y = i * row
        w = max(1.0, (WIDTH - label_w - 70) * value / top)
        body.append(
            f'<text class="label" x="{label_w - 6}" y="{y + 16}" text-anchor="end">{escape(_cut(label, 30))}</text>'
            f'<rect class="c0" x="{label_w}" y="{y + 4}" width="{w:.1f}" height="{row - 8}"></rect>'
            f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + 16}">{_num(value)}{escape(unit)}</text>'
        )
    desc = "; ".join(f"{label}: {_num(value)}{unit}" for label, value in items)
    return _svg(title, row * len(items), "".join(body), desc)


def columns(title: str, periods: Sequence[str], series: Mapping[str, Sequence[int]]) -> Markup:
    """Stacked columns over time: one column per period, one colour per series (with its legend)."""
    if not periods:
        return Markup("")
    names = list(series)
    totals = [sum(series[n][i] for n in names) for i in range(len(periods))]
    top = max(totals) or 1
    plot_h, left, bottom = 180, 44, 22
    legend_h = 20 * ((len(names) + 3) // 4)
    step = (WIDTH - left) / len(periods)
    body = [f'<text class="value" x="{left - 6}" y="12" text-anchor="end">{top}</text>',
            f'<line class="axis" x1="{left}" y1="{plot_h}" x2="{WIDTH}" y2="{plot_h}"></line>']
    for i, period in enumerate(periods):
        x, y, w = left + i * step, float(plot_h), min(step * 0.8, 48)
        for k, name in enumerate(names):
            h = plot_h * series[name][i] / top
            if h:
                y -= h
                body.append(f'<rect class="c{k % PALETTE}" x="{x + (step - w) / 2:.1f}" y="{y:.1f}" width="{w:.1f}" '
                            f'height="{h:.1f}"><title>{escape(period)} · {escape(name)}: {series[name][i]}</title></rect>')
        if i % max(1, len(periods) // 8) == 0:
            body.append(f'<text class="label" x="{x + step / 2:.1f}" y="{plot_h + 16}" text-anchor="middle">{escape(period)}</text>')
    for k, name in enumerate(names):
        lx, ly = (k % 4) * (WIDTH / 4), plot_h + bottom + 6 + 20 * (k // 4)
        body.append(f'<rect class="c{k % PALETTE}" x="{lx:.1f}" y="{ly}" width="12" height="12"></rect>'
                    f'<text class="label" x="{lx + 16:.1f}" y="{ly + 11}">{escape(_cut(name, 22))}</text>')
    desc = "; ".join(f"{name}: {sum(series[name])}" for name in names) + f" over {periods[0]} to {periods[-1]}"
    return _svg(title, plot_h + bottom + 10 + legend_h, "".join(body), desc)


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
