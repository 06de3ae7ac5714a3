"""The run's picture: loss and samples/s over steps, checkpoints and restarts marked."""

from __future__ import annotations

from pathlib import Path

PNG_NAME = "raycluster_curves.png"
MARK_STYLE = {"checkpoint": ("tab:green", ":"), "restart": ("tab:red", "--"), "interrupted": ("tab:orange", "-.")}


def draw(png: Path, points: dict[str, dict[int, float]], marks: dict[str, list[int]]) -> str | None:
    """Writes ``png`` (matplotlib, no display needed); None when no loss was logged."""
    if not points.get("loss"):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [key for key in ("loss", "samples_per_s") if points.get(key)]
    figure, axes = plt.subplots(len(panels), 1, figsize=(8, 3 * len(panels)), sharex=True, squeeze=False)
    for ax, key in zip(axes[:, 0], panels, strict=True):
        steps = sorted(points[key])
        ax.plot(steps, [points[key][s] for s in steps], marker="." if len(steps) < 50 else None)
        ax.set_ylabel(key)
        for event, (color, style) in MARK_STYLE.items():
            for i, step in enumerate(sorted(set(marks.get(event, [])))):
                ax.axvline(step, color=color, linestyle=style, linewidth=1, label=event if i == 0 else None)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # the marks only: the panel's own line is named by its axis
            ax.legend(loc="upper right", fontsize="small")
    axes[-1, 0].set_xlabel("step")
    figure.suptitle("raycluster run: " + png.parent.name)
    figure.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(png, dpi=100)
    plt.close(figure)
    return str(png)
