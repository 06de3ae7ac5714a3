"""Fault injection for tests: the one seam. The code that can be made to fail takes a ``Faults`` value and asks
it; nothing below reads the environment for a fault. The command that starts a run reads the environment once
(``from_env``), so that a simulated job's hosts, which get the ``RAYCLUSTER_TESTING_*`` variables from the sim,
inject the same faults; a test that builds the actors itself hands them a ``Faults`` directly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

PREFIX = "RAYCLUSTER_TESTING_"
"""Every fault's variable starts so; a simulated job passes them all to its hosts (``forwarded``)."""
PUBLISH_DELAY = f"{PREFIX}PUBLISH_DELAY_S"
"""Every publish waits this long after staging, so a test can stop a job while a checkpoint is being published."""
EVAL_RAISE = f"{PREFIX}EVAL_RAISE"
"""Checkpoint steps (``2,6``) whose evaluation raises."""
RAY_START_FAILS = f"{PREFIX}RAY_START_FAILS"
"""A worker host (``algo-3``) whose first ``ray start`` exits before its node joins (given a flag it refuses):
what that host's one retry must make good."""


@dataclass(frozen=True)
class Faults:
    publish_delay_s: float = 0.0
    eval_raise: tuple[int, ...] = ()
    ray_start_fails_on: str = ""
    resume_check_s: float = 0.0
    """The keeper's resume check (``newest_complete``) takes this long, as hashing a restored checkpoint of many
    GB would (only a test sets it): what a keeper whose threads are all busy must still take words in."""
    lose_announcements: bool = False
    """The checkpoint keeper's word of a commit never reaches the evaluation keeper (only a test sets it): what
    the evaluation keeper's own reconciliation at the end must make good."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Faults:
        raising = environ.get(EVAL_RAISE, "")
        return cls(
            publish_delay_s=float(environ.get(PUBLISH_DELAY, 0) or 0),
            eval_raise=tuple(int(step) for step in raising.split(",") if step.strip()),
            ray_start_fails_on=environ.get(RAY_START_FAILS, ""),
        )

    def ray_start_args(self, host: str, first: bool) -> list[str]:
        """Extra arguments for ``host``'s ``ray start``: on its first, one it refuses, when asked for."""
        if first and host == self.ray_start_fails_on:
            log.info("testing: this host's first ray start is given a flag it refuses (%s)", RAY_START_FAILS)
            return ["--raycluster-testing-refused-flag"]
        return []

    def delay_publish(self, name: str) -> None:
        if self.publish_delay_s:
            log.info("testing: holding the publish of %s for %gs (%s)", name, self.publish_delay_s, PUBLISH_DELAY)
            time.sleep(self.publish_delay_s)

    def slow_resume_check(self) -> None:
        if self.resume_check_s:
            log.info("testing: the resume check takes %gs", self.resume_check_s)
            time.sleep(self.resume_check_s)

    def raise_in_evaluation(self, name: str) -> None:
        if int(name) in self.eval_raise:
            raise RuntimeError(f"testing: the evaluation of checkpoint {name} raises ({EVAL_RAISE})")


NO_FAULTS = Faults()


def forwarded(environ: Mapping[str, str]) -> dict[str, str]:
    """The fault variables of ``environ``, as a simulated job hands them to every host's container."""
    return {name: value for name, value in environ.items() if name.startswith(PREFIX)}
