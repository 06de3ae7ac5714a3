"""The 120 s between SageMaker's SIGTERM and its SIGKILL, and what each party may spend of it: the one
declaration the head, the worker hosts and the job's stop take their deadlines from. ``problems()`` says
where the parts would not fit; ``tests/test_stop_budget.py`` checks every accepted ``entry.stop_timeout_s``, and
that every wait in the hosts' code is bounded by a share of this budget or cut short by the stop clock.

Counted from the SIGTERM, every host gets it at once:
- the driver has ``stop_timeout_s`` to save the step reached; the keeper publishes that checkpoint inside it
  (rank 0 waits for the publish before it reports), and Ray's job stop SIGKILLs the driver after it;
- the stopped driver's report reaches the Jobs API within ``report_s`` after that: the head stops watching;
- the head reads the job's last lines (``follow_s``) and its outcome (``ask_s``), and publishes the outcome;
- worker hosts, polling every ``poll_s`` (each read of the head's word bounded by ``read_s``), read it, stop
  their nodes (``node_stop_s``) and exit; the head
  waits up to ``release_s`` for that, then stops its own node and exits (``exit_s``);
- a worker host that hears nothing gives up at ``worker_gives_up_at``, in time to stop its node and exit.
"""

from __future__ import annotations

from dataclasses import dataclass

SIGKILL_AFTER_S = 120.0
MAX_STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class StopBudget:
    stop_timeout_s: float
    report_s: float = 10.0
    follow_s: float = 2.0
    ask_s: float = 5.0
    poll_s: float = 1.0
    read_s: float = 2.0
    release_s: float = 20.0
    node_stop_s: float = 15.0
    exit_s: float = 5.0

    @property
    def job_watched_until(self) -> float:
        return self.stop_timeout_s + self.report_s

    @property
    def outcome_by(self) -> float:
        """The head has published the job's outcome to the worker hosts."""
        return self.job_watched_until + self.follow_s + self.ask_s

    @property
    def head_node_stop_at(self) -> float:
        return SIGKILL_AFTER_S - self.exit_s - self.node_stop_s

    @property
    def worker_gives_up_at(self) -> float:
        return SIGKILL_AFTER_S - self.exit_s - self.node_stop_s

    def problems(self) -> list[str]:
        """Each part that does not fit, in words; none when the budget holds."""
        checks = [
            (self.stop_timeout_s > 0, "the driver gets no time to save"),
            (self.outcome_by + self.release_s <= self.head_node_stop_at, "the head cannot release its workers"),
            (
                self.outcome_by + self.poll_s + self.read_s <= self.worker_gives_up_at,
                "worker hosts give up before the outcome",
            ),
            (
                self.outcome_by + self.poll_s + self.read_s + self.node_stop_s <= self.outcome_by + self.release_s,
                "worker nodes outlast the head's wait for them",
            ),
            (self.head_node_stop_at + self.node_stop_s + self.exit_s <= SIGKILL_AFTER_S, "the head outlasts SIGKILL"),
        ]
        return [why for fits, why in checks if not fits]
