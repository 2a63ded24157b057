"""Line charts of a sweep's summary against n (needs the ``viz`` extra).

One line per protocol (and per network setting when a sweep has several), for
delivery delay, buffer size and metadata bytes. matplotlib is imported inside
the function, on the Agg backend, so this module imports without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mailroom.core.extras import need

#: file stem -> (column, dashed companion column, title, y axis label with its unit)
CHARTS: dict[str, tuple[str, str, str, str]] = {
    "delay": (
        "delay_mean",
        "delay_p99",
        "delivery delay (solid: mean, dashed: p99)",
        "delay (simulated time units)",
    ),
    "buffer": (
        "buffer_mean",
        "buffer_max",
        "held messages per process (solid: mean, dashed: max)",
        "messages in the mail room",
    ),
    "metadata": (
        "meta_mean",
        "meta_p99",
        "metadata per data packet (solid: mean, dashed: p99)",
        "bytes per data packet (through the codec)",
    ),
}
#: one marker and line style per line, so that lines that coincide stay distinguishable
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
STYLES = ("-", "-.", ":", (0, (5, 1, 1, 1)))


def plot_sweep(
    summary: Sequence[Mapping[str, Any]], out: str | Path, *, title: str = ""
) -> list[Path]:
    """Write ``delay.png``, ``buffer.png``, ``metadata.png`` and all three side by side in
    ``sweep.png`` and ``sweep.svg``; return their paths."""
    matplotlib = need("matplotlib", "plotting a sweep")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    networks = sorted({str(r["network"]) for r in summary})
    lines: dict[str, list[Mapping[str, Any]]] = {}
    for row in sorted(summary, key=lambda r: (r["protocol"], r["network"], r["n"])):
        label = row["protocol"] + (f", {row['network']}" if len(networks) > 1 else "")
        lines.setdefault(label, []).append(row)
    written = []
    fig_all, axes = plt.subplots(1, len(CHARTS), figsize=(5.2 * len(CHARTS), 4.2))
    for ax_all, (stem, spec) in zip(axes, CHARTS.items(), strict=True):
        fig, ax = plt.subplots(figsize=(6, 4.2))
        for target in (ax, ax_all):
            _draw(target, lines, spec)
        ax.legend(fontsize="small")
        if title:
            ax.set_title(f"{title}\n{ax.get_title()}", fontsize="medium")
        fig.tight_layout()
        written.append(out / f"{stem}.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    axes[0].legend(fontsize="small")
    if title:
        fig_all.suptitle(title)
    fig_all.tight_layout()
    for suffix in ("png", "svg"):
        written.append(out / f"sweep.{suffix}")
        fig_all.savefig(written[-1], dpi=80)
    plt.close(fig_all)
    return written


def _draw(
    ax: Any, lines: Mapping[str, Sequence[Mapping[str, Any]]], spec: tuple[str, str, str, str]
) -> None:
    """One chart: a line per label for the main column, dashed for its companion.

    Each label gets its own marker shape, and earlier lines larger, hollow markers
    drawn under the later ones, so that lines that coincide (RST and KS at small
    n) stay visible.
    """
    column, companion, title, ylabel = spec
    for i, (name, rows) in enumerate(lines.items()):
        ns = [r["n"] for r in rows]
        size = max(4.0, 10.0 - 2.0 * i)
        (line,) = ax.plot(
            ns,
            [r[column] for r in rows],
            marker=MARKERS[i % len(MARKERS)],
            ms=size,
            mfc="none" if i % 2 == 0 else None,
            mew=1.5,
            lw=max(1.0, 2.6 - 0.5 * i),
            label=name,
            zorder=2 + i,
        )
        ax.plot(ns, [r[companion] for r in rows], ls="--", color=line.get_color(), alpha=0.6)
    ax.set_xscale("log", base=2)
    all_ns = sorted({r["n"] for rows in lines.values() for r in rows})
    ax.set_xticks(all_ns, [str(n) for n in all_ns])
    ax.set_xlabel("n (processes)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)
