#!/usr/bin/python3
"""The training loss curve as an SVG (no plotting library needed): each step's loss (light)
and its running mean over 25 steps (dark), against the step, from train.py's --log.

  plot_loss.py --log train-log.jsonl --out loss.svg
"""

import argparse
import json
import math
import sys

sys.dont_write_bytecode = True

W, H, L, R, T, B = 640, 360, 56, 16, 28, 40   # size and margins


def svg(steps, losses, title):
    n = len(losses)
    mean = [sum(losses[max(0, i - 24):i + 1]) / (i + 1 - max(0, i - 24)) for i in range(n)]
    hi = math.ceil(max(losses))
    x = lambda s: L + (W - L - R) * s / max(steps[-1], 1)           # noqa: E731
    y = lambda v: T + (H - T - B) * (1 - v / hi)                    # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14">{title}</text>']
    for v in range(0, hi + 1):
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v}</text>')
    for k in range(0, 6):
        s = round(steps[-1] * k / 5)
        out.append(f'<text x="{x(s):.1f}" y="{H - B + 16}" text-anchor="middle">{s}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 6}" text-anchor="middle">step</text>'
               f'<text x="14" y="{(T + H - B) / 2}" transform="rotate(-90 14 {(T + H - B) / 2})" '
               f'text-anchor="middle">loss (cross-entropy, nats/token)</text>')
    for series, colour, width in ((losses, "#9bc", 1), (mean, "#137", 2)):
        pts = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in zip(steps, series))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="{width}"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="kimi-k3-mini: training loss on the completions")
    a = ap.parse_args()
    with open(a.log) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    if not recs:
        raise SystemExit(f"plot_loss: {a.log} has no steps")
    with open(a.out, "w") as f:
        f.write(svg([r["step"] for r in recs], [r["loss"] for r in recs], a.title))


if __name__ == "__main__":
    main()
