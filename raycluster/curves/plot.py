"""The run's picture: loss and samples/s over steps, checkpoints and restarts marked; each checkpoint's
evaluation (``--cluster.async_eval``) in panels of its own, at that checkpoint's step, the best one marked."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PNG_NAME = "raycluster_curves.png"
PANELS = ("loss", "samples_per_s", "eval/loss", "eval/pc_success", "eval/avg_sum_reward")
EVENT = "event/"
MARK_STYLE = {
    "checkpoint": ("tab:green", ":"),
    "restart": ("tab:red", "--"),
    "interrupted": ("tab:orange", "-."),
    "best": ("tab:purple", "-"),
}


def draw(png: Path, rows: list[dict]) -> str | None:
    """Writes ``png`` from a run's logged rows (``{"step": N, "loss": ..., "event/restart": ...}``, as trackio
    keeps them) with matplotlib, no display needed; None when no loss was logged."""
    points: dict[str, dict[int, float]] = defaultdict(dict)
    marks: dict[str, set[int]] = defaultdict(set)
    for row in rows:
        for key, value in row.items():
            if key in PANELS:
                points[key][row["step"]] = value
            elif key.startswith(EVENT):
                marks[key.removeprefix(EVENT)].add(row["step"])
    if not points.get("loss"):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [key for key in PANELS if points.get(key)]
    figure, axes = plt.subplots(len(panels), 1, figsize=(8, 3 * len(panels)), sharex=True, squeeze=False)
    for ax, key in zip(axes[:, 0], panels, strict=True):
        steps = sorted(points[key])
        ax.plot(
            steps,
            [points[key][s] for s in steps],
            marker="o" if key.startswith("eval/") else "." if len(steps) < 50 else None,
        )
        ax.set_ylabel(key)
        for event, (color, style) in MARK_STYLE.items():
            for i, step in enumerate(sorted(marks.get(event, ()))):
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
