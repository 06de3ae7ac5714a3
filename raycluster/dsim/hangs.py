"""The hang watchdog at up to 512 ranks, in one process: the project's own ``ProgressBeacon`` (each rank's word:
where it is, how long since its progress, bytes moving counted as progress), ``Beats`` (the board) and
``Watchdog`` (the verdict, its line, the ranks it ends), driven by the seeded scheduler with a fake clock.

What a run is: ranks, 8 a host, agree on where to start, take a first step, then train in lockstep as a collective
makes them (a step ends on every rank at once), saving every few steps; after the last step rank 0 publishes and
the others are done. Each host's monotonic clock starts from an origin of its own (no two are ever compared, so a
step of the wall clock changes nothing), and the beats travel the network: late, reordered, repeated. One fault
a run:
- none: a healthy run, sometimes with a long transfer that moves bytes (every rank's first step downloading a
  dataset, or rank 0's Hub push after the last step, each for three times what the activity is allowed);
- a rank the kernel stopped mid-step: it beats no more, and every other rank waits in the collective;
- a rank stuck in its data loader: it beats on, as every other rank does, waiting in the collective;
- either, with the board restarted empty by Ray mid-run.
The watchdog checks at its own pace. Once it has ended the stuck ranks, Ray Train restarts the group (a new
group's number), and the old group's beats still in flight must not count.

What must hold: no verdict while the group makes progress; every verdict within its bound of the moment progress
stopped, once per group, its line at most ``LINE_CHARS`` with the stacks' file in it and the culprit named; the
ranks it ends are the stopped one, or every rank where all beat; a group that stopped gets its verdict.
"""

from __future__ import annotations

from pathlib import Path

from raycluster.dsim.hang_profile import FRAMES, LOADER, RANKS_PER_HOST, STOPPED, HangProfile, waiting_frame
from raycluster.dsim.scheduler import Scheduler
from raycluster.dsim.sweep import InvariantBroken
from raycluster.training.watch.hang_report import LINE_CHARS
from raycluster.training.watch.progress import MOVING_BYTES_PER_S, PUBLISHING, STARTING, Beat, Beats, ProgressBeacon
from raycluster.training.watch.watchdog import Allowances, Watchdog, Watched


class HangWorld:
    def __init__(self, seed: int, profile: HangProfile, report_dir: Path):
        """``report_dir``: where the watchdog keeps each verdict's stacks (a test's own folder)."""
        self.sim, self.profile = Scheduler(seed, profile.network), profile
        self.allowances = Allowances.for_timeout(profile.timeout_s)
        self.board, self.failed_through, self.group = Beats(), 0, 1
        self.origin = [self.sim.rng.uniform(0, 1e6) for _ in range(-(-profile.ranks // RANKS_PER_HOST))]
        """Each host's monotonic clock: an origin of its own."""
        self.transfers: dict[int, list[tuple[float, float]]] = {}
        """rank -> (start, end) of its transfers, each moving bytes at twice ``MOVING_BYTES_PER_S``."""
        self.stopped_at: float | None = None
        """When the group's progress stopped (its last step's end), once a fault struck."""
        self.struck_at: float | None = None
        self.verdicts: list[tuple[float, int, str]] = []
        self.ended: list[list[Beat]] = []
        self.dead_ranks: set[int] = set()
        self.done_ranks: set[int] = set()
        """Ranks whose beacon said its last word (done): its thread beats no more."""
        self.board_died = False
        self.beacons: dict[int, ProgressBeacon] = {}
        watched = Watched(
            failed_through=lambda: self.failed_through,
            beats=lambda failed: self.board.newest_attempt(self.sim.now, failed),
            hang_seen=self._hang_seen,
            take_stacks=self._stacks,
            end_ranks=self._end_ranks,
            clock=lambda: self.sim.now,
        )
        self.watchdog = Watchdog(watched, self.allowances, [report_dir])

    # The world: a group of ranks, their beats, and their training in lockstep.
    def _start_group(self, group: int, fault: str) -> None:
        self.group, self.beacons, self.done_ranks = group, {}, set()
        for rank in range(self.profile.ranks):
            host = rank // RANKS_PER_HOST
            self.beacons[rank] = ProgressBeacon(
                lambda beat: self.sim.send(lambda: self.board.beat(beat, self.sim.now)),
                rank,
                group,
                (f"algo-{host + 1}", f"node-{host}"),
                None,
                moved=lambda rank=rank: self._moved(rank),
                clock=lambda host=host: self.origin[host] + self.sim.now,
                process=(100_000 * group + rank, float(group)),
                world_size=self.profile.ranks,
            )
            every = self.allowances.beats_every_s()
            self.sim.at(self.sim.rng.uniform(0, every), lambda group=group, rank=rank: self._beat(group, rank))
        self.sim.at(self.sim.rng.uniform(1, min(30, self.profile.timeout_s)), lambda: self._first_step(group, fault))

    def _beat(self, group: int, rank: int) -> None:
        if group != self.group or rank in self.dead_ranks or rank in self.done_ranks:
            return
        if not (self.profile.fault == STOPPED and rank == self.profile.fault_rank and self.struck_at is not None):
            self.beacons[rank].beat_now()
        self.sim.at(self.allowances.beats_every_s(), lambda: self._beat(group, rank))

    def _moved(self, rank: int) -> int:
        now, spans = self.sim.now, self.transfers.get(rank, ())
        return int(sum(max(0.0, min(now, end) - start) for start, end in spans) * 2 * MOVING_BYTES_PER_S)

    def _transfer(self, ranks, seconds: float) -> None:
        for rank in ranks:
            self.transfers.setdefault(rank, []).append((self.sim.now, self.sim.now + seconds))

    def _first_step(self, group: int, fault: str) -> None:
        for beacon in self.beacons.values():
            beacon.now(STARTING)
        took = self._step_s()
        if self.profile.download and group == 1:
            took = 3 * self.allowances.of(STARTING)
            self._transfer(self.beacons, took)
        self.sim.at(took, lambda: self._step_ends(group, 1, fault))

    def _step_s(self) -> float:
        return self.sim.rng.uniform(*self.profile.step_s) * self.profile.timeout_s

    def _step_ends(self, group: int, step: int, fault: str) -> None:
        if group != self.group:
            return
        for beacon in self.beacons.values():
            beacon.after_step(step, 0.0, None)
        if step == self.profile.steps:
            return self._loop_ends(group)
        if fault and step + 1 == self.profile.fault_step:  # the next step never finishes
            self.stopped_at = self.sim.now
            self.sim.at(self._step_s() / 2, self._strike)
            self.sim.at(self.bound_s(), self._verdict_due)
            return
        took = self._step_s()
        if step % self.profile.save_every == 0:
            for beacon in self.beacons.values():
                beacon.checkpoint_started(None)
            self.sim.at(took, lambda: [b.checkpoint_saved(None) for b in self.beacons.values()])
            took += self._step_s()
        self.sim.at(took, lambda: self._step_ends(group, step + 1, fault))

    def _strike(self) -> None:
        self.struck_at = self.sim.now

    def _loop_ends(self, group: int) -> None:
        for rank, beacon in self.beacons.items():
            if rank:
                beacon.stop()
                self.done_ranks.add(rank)
        self.beacons[0].now(PUBLISHING)
        took = 3 * self.allowances.of(PUBLISHING) if self.profile.hub_push else self._step_s()
        if self.profile.hub_push:
            self._transfer([0], took)
        self.sim.at(took, lambda: self._done(group))

    def _done(self, group: int) -> None:
        if group == self.group:
            self.beacons[0].stop()
            self.group = 0  # no more beats: the run is over

    def _board_dies(self) -> None:
        self.board, self.board_died = Beats(), True

    def _check(self) -> None:
        self.watchdog.check()
        if self.group:
            self.sim.at(self.allowances.beats_every_s(), self._check)

    # What the watchdog does, as Ray would carry it out here.
    def _stacks(self, ranks: list[Beat]) -> dict[int, tuple[str, str, str]]:
        taken = {}
        for beat in ranks:
            culprit = self.struck_at is not None and beat.rank == self.profile.fault_rank
            fault = self.profile.fault if culprit else ""
            state = {STOPPED: "stopped", LOADER: "running", "": "sleeping"}[fault]
            frame = FRAMES[fault] if fault else waiting_frame(beat.rank // RANKS_PER_HOST, self.profile.waiting_places)
            stack = (
                f'Thread {beat.native_thread} (active): "MainThread"\n    {frame}\n    train (lerobot/train.py:300)\n'
            )
            taken[beat.pid] = (state, "py-spy", stack)
        return taken

    def _hang_seen(self, group: int, line: str) -> None:
        self.verdicts.append((self.sim.now, group, line))
        self._check_verdict(group, line)

    def _end_ranks(self, ranks: list[Beat]) -> None:
        self.ended.append(ranks)
        group = ranks[0].attempt if ranks else self.group
        self.dead_ranks |= {b.rank for b in ranks}
        # Ray Train sees its workers die a few seconds later and starts a new group, which trains to its end.
        self.sim.at(self.sim.rng.uniform(1, 13), lambda: self._restart(group))

    def _restart(self, failed: int) -> None:
        if failed == self.group:
            self.failed_through, self.dead_ranks, self.struck_at, self.stopped_at = failed, set(), None, None
            self._start_group(failed + 1, "")

    # What must hold.
    def _check_verdict(self, group: int, line: str) -> None:
        profile, now = self.profile, self.sim.now
        if self.stopped_at is None or group != self.group:
            raise InvariantBroken(f"a verdict on group {group} at {now:.1f}s while it makes progress: {line}")
        if now - self.stopped_at < profile.timeout_s:
            raise InvariantBroken(f"a verdict {now - self.stopped_at:.1f}s after progress stopped: {line}")
        if len(line) > LINE_CHARS or "stacks in /" not in line:
            raise InvariantBroken(f"a line of {len(line)} characters, or without its stacks' file: {line}")
        culprit = profile.fault_rank
        if f"rank {culprit} on " not in line and not (self.board_died and f"rank {culprit} not heard" in line):
            raise InvariantBroken(f"the line does not name rank {culprit}: {line}")
        if len([v for v in self.verdicts if v[1] == group]) > 1:
            raise InvariantBroken(f"group {group} answered twice")

    def _verdict_due(self) -> None:
        if not self.verdicts:
            raise InvariantBroken(f"no verdict {self.bound_s():.0f}s after progress stopped at {self.stopped_at:.1f}s")

    def check_ended(self) -> None:
        """The ranks each verdict ended: the stopped one among them (unless the board lost its beats: Ray Train's
        teardown ends it then), or every rank where all beat."""
        for ranks in self.ended:
            ended = {b.rank for b in ranks}
            if self.profile.fault == STOPPED and not self.board_died and self.profile.fault_rank not in ended:
                raise InvariantBroken(f"ended ranks {sorted(ended)}, not the stopped rank")
            if self.profile.fault == LOADER and ended != set(range(self.profile.ranks)):
                raise InvariantBroken(f"ended {len(ended)} ranks of {self.profile.ranks}, where all beat")

    def bound_s(self) -> float:
        """The longest a verdict may take after progress stopped: the fault's strike (half a step), the allowance
        (a stopped rank's silence), a check's interval and a beat's, the network's slowest message, and where the
        board lost its beats, a silent rank's wait for every live rank to be heard again."""
        allowances, network = self.allowances, self.profile.network
        slowest = network.slow_delay_s[1] if network.slow_share else network.delay_s[1]
        silent = max(allowances.step_s, allowances.silent_after_s())
        restarted = allowances.silent_after_s() + slowest if self.profile.board_dies_at_s is not None else 0.0
        return (
            max(self.profile.step_s) * self.profile.timeout_s
            + silent
            + 2 * allowances.beats_every_s()
            + slowest
            + restarted
        )

    def run(self) -> HangWorld:
        self._start_group(1, self.profile.fault)
        if self.profile.board_dies_at_s is not None:
            self.sim.at(self.profile.board_dies_at_s, self._board_dies)
        self.sim.at(self.allowances.beats_every_s(), self._check)
        self.sim.run(float("inf"))
        if self.profile.fault and len(self.verdicts) != 1:
            raise InvariantBroken(f"{len(self.verdicts)} verdicts on a run with one hang")
        self.check_ended()
        return self
