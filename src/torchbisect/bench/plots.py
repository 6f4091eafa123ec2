"""Small self-contained SVG charts for `reports/bench/` (no plotting library on GPU runners)."""

from __future__ import annotations

import math
from html import escape

COLOURS = ("#0b6e99", "#c2410c", "#15803d", "#7c3aed")
W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 360, 64, 170, 36, 48


def line_chart(
    title: str,
    x_label: str,
    y_label: str,
    xs: list[float],
    series: dict[str, list[float]],
    *,
    hline: tuple[str, float] | None = None,
) -> str:
    """Lines over a log2 x axis; `hline` draws a labelled horizontal reference (e.g. peak)."""
    ys = [y for ys in series.values() for y in ys] + ([hline[1]] if hline else [])
    y_max = _nice(max(ys) * 1.05)
    x_lo, x_hi = math.log2(min(xs)), math.log2(max(xs))

    def px(x: float) -> float:
        return LEFT + (math.log2(x) - x_lo) / max(x_hi - x_lo, 1e-9) * (W - LEFT - RIGHT)

    def py(y: float) -> float:
        return H - BOTTOM - y / y_max * (H - TOP - BOTTOM)

    parts = [_frame(title, x_label, y_label)]
    for i in range(5):
        y = y_max * i / 4
        parts.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
            f'stroke="#e5e7eb"/><text x="{LEFT - 6}" y="{py(y) + 4:.1f}" '
            f'text-anchor="end">{y:g}</text>'
        )
    for x in xs:
        parts.append(
            f'<text x="{px(x):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{x:g}</text>'
        )
    if hline:
        parts.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(hline[1]):.1f}" '
            f'y2="{py(hline[1]):.1f}" stroke="#6b7280" stroke-dasharray="5 4"/>'
            f'<text x="{W - RIGHT + 6}" y="{py(hline[1]) + 4:.1f}">'
            f"{escape(hline[0])}</text>"
        )
    for i, (name, values) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, values, strict=True))
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        parts += [
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>'
            for x, y in zip(xs, values, strict=True)
        ]
        parts.append(_legend(i, name, colour))
    return _svg(parts)


def bar_chart(title: str, y_label: str, bars: dict[str, float], goals: dict[str, float]) -> str:
    """One bar per measurement with its goal as a tick; values are ratios or seconds."""
    y_max = _nice(max([*bars.values(), *goals.values()]) * 1.15)
    slot = (W - LEFT - 40) / max(len(bars), 1)
    parts = [_frame(title, "", y_label)]
    for i, (name, value) in enumerate(bars.items()):
        x = LEFT + i * slot + slot * 0.2
        h = value / y_max * (H - TOP - BOTTOM)
        parts.append(
            f'<rect x="{x:.1f}" y="{H - BOTTOM - h:.1f}" width="{slot * 0.6:.1f}" '
            f'height="{h:.1f}" fill="{COLOURS[0]}"/><text x="{x + slot * 0.3:.1f}" '
            f'y="{H - BOTTOM - h - 4:.1f}" text-anchor="middle">{value:.3g}</text>'
            f'<text x="{x + slot * 0.3:.1f}" y="{H - BOTTOM + 16}" '
            f'text-anchor="middle">{escape(name)}</text>'
        )
        if name in goals:
            gy = H - BOTTOM - goals[name] / y_max * (H - TOP - BOTTOM)
            parts.append(
                f'<line x1="{x - 4:.1f}" x2="{x + slot * 0.6 + 4:.1f}" y1="{gy:.1f}" '
                f'y2="{gy:.1f}" stroke="{COLOURS[1]}" stroke-width="2" '
                f'stroke-dasharray="4 3"/>'
            )
    parts.append(_legend(0, "goal", COLOURS[1]))
    return _svg(parts)


def _frame(title: str, x_label: str, y_label: str) -> str:
    return (
        f'<rect width="{W}" height="{H}" fill="white"/>'
        f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>'
        f'<text x="{(W - RIGHT + LEFT) / 2}" y="{H - 10}" text-anchor="middle">'
        f'{escape(x_label)}</text><text x="14" y="{H / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {H / 2})">{escape(y_label)}</text>'
        f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" '
        f'stroke="#111"/>'
    )


def _legend(i: int, name: str, colour: str) -> str:
    y = TOP + 14 + i * 18
    return (
        f'<rect x="{W - RIGHT + 12}" y="{y - 9}" width="12" height="4" fill="{colour}"/>'
        f'<text x="{W - RIGHT + 30}" y="{y - 4}">{escape(name)}</text>'
    )


def _svg(parts: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">'
        + "".join(parts)
        + "</svg>\n"
    )


def _nice(value: float) -> float:
    """The next 1/2/5 × 10^k at or above `value`, so axis ticks read well."""
    if value <= 0:
        return 1.0
    exp: float = 10 ** math.floor(math.log10(value))  # an int from 1 up, a float below
    return next(m * exp for m in (1, 2, 5, 10) if m * exp >= value)
