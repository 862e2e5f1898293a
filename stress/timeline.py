"""timeline.png: device, host and disk bytes, RSS, untracked bytes (RSS - host tier - device
bytes held in RAM) and Arrow's pool per worker over time, with the limits drawn as lines,
from the samples taken during the run. A panel whose readings no worker had is left out."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from .record import RunRecord

MIB = 2**20
PANELS = (
    ("device", "device bytes"),
    ("host", "host bytes (store)"),
    ("disk", "disk bytes (spill files)"),
    ("rss", "RSS"),
    ("untracked", "untracked\n(RSS - device - host)"),
    ("arrow", "Arrow pool"),
)


def draw(record: RunRecord, path: Path) -> bool:
    """Write the picture; False when there is nothing to draw."""
    series: dict[str, dict[str, list[tuple[float, int]]]] = defaultdict(lambda: defaultdict(list))
    for s in record.samples:
        for field, _ in PANELS:
            v = getattr(s, field)
            if v is not None:
                series[field][s.worker].append((s.t, v))
    panels = [(f, title) for f, title in PANELS if series.get(f)]
    if not panels:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.3 * len(panels) + 0.6), sharex=True)
    axes = [axes] if len(panels) == 1 else list(axes)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (field, title) in zip(axes, panels, strict=True):
        for i, (worker, points) in enumerate(sorted(series[field].items())):
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, [y / MIB for y in ys], label=worker, color=colors[i % len(colors)], lw=1.2)
        for name, value in record.limits.items():
            if value and name.split()[0] == field:
                ax.axhline(value / MIB, color="red" if "limit" in name else "orange", ls="--", lw=1, label=name)
        for t, label in record.marks:
            ax.axvline(t, color="grey", lw=0.6, ls=":")
            if ax is axes[0]:
                ax.annotate(label, (t, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                            rotation=90, va="top", ha="right", color="grey")
        ax.set_ylabel(f"{title}\nMiB", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", ncol=4)
    axes[-1].set_xlabel("seconds since start")
    settings = record.settings
    fig.suptitle(
        f"stress {record.scenario}: impl {', '.join(settings.get('impls', []))}, "
        f"{settings.get('workers')} workers, device {settings.get('device')}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True
