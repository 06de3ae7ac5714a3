"""What a simulated hang run looks like (``HangProfile``: ranks, the hang timeout, steps, the fault, the board's
restart, long transfers, the network), and where each kind of rank's stack stops."""

from __future__ import annotations

from dataclasses import dataclass

from raycluster.dsim.scheduler import Network

RANKS_PER_HOST = 8
STOPPED, LOADER = "stopped", "loader"
"""The faults that hang a group: a rank the kernel stopped, a rank stuck in its data loader."""
FRAMES = {
    STOPPED: "_single_tensor_adam (torch/optim/adam.py:345)",
    LOADER: "__next__ (torch/utils/data/dataloader.py:733)",
    "": "all_reduce (torch/distributed/c10d.py:2501)",
}
"""Where a rank's stack stops: the culprit's, by its fault, and every other rank's (``waiting_frame``)."""


def waiting_frame(host: int, places: int) -> str:
    """Where a waiting rank on ``host`` stops, when the waiting ranks are spread over ``places`` frames."""
    if places == 1:
        return FRAMES[""]
    place = host % places
    return f"wait_{place} (/opt/conda/lib/python3.12/site-packages/torch/distributed/collectives/op_{place}.py:{place})"


@dataclass(frozen=True)
class HangProfile:
    ranks: int = 16
    timeout_s: float = 15.0
    steps: int = 12
    step_s: tuple[float, float] = (0.05, 0.4)
    """A step's time, as a share of the timeout."""
    save_every: int = 4
    fault: str = ""
    """``STOPPED``, ``LOADER`` or none."""
    fault_rank: int = 0
    fault_step: int = 5
    """The step during which the fault strikes (it never finishes)."""
    board_dies_at_s: float | None = None
    """When Ray restarts the board (empty), from the run's start."""
    download: bool = False
    """Every rank's first step downloads, bytes moving, for three times what a first step is allowed."""
    hub_push: bool = False
    """Rank 0's publish after the last step pushes to the Hub, bytes moving, for three times its allowance."""
    waiting_places: int = 1
    """How many frames the waiting ranks' stacks stop in, each by a long path, host by host (a partial collective
    hang spreads them): many places make the line choose what to show."""
    network: Network = Network()
