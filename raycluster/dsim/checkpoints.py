"""The checkpoint commit protocol at N hosts, in one process: the project's own ``Commits`` (the keeper's every
decision: ``PartSet``, ``Pacer``, placement, the record) and each host's ``ShipQueue``, driven by a seeded scheduler
with a fake clock, no Ray, invariants checked after every event.

What a run is: every host saves the same steps every ``interval_s`` (as ranks in one collective do); each host
stages the saves its ``ShipQueue`` chooses, taking its own time (``Profile.slow``: some or all hosts take longer
than the save interval), and places its part into its root when the keeper says so (a place may outlast its
deadline and end late; what it may still write is the part store's own ``Placements``); every message between a
host and the keeper travels through the scheduler's network (delayed, reordered, repeated); a host may die
mid-run, after which the worker group restarts as a new attempt from the newest committed step, as Ray Train's
does (the dead host replaced by one with an empty disk); a host's part store process may die alone, and Ray
starts it again on the same host: what it had staged and its memory of placements are gone, its root is intact,
and every call cut off by the death or sent meanwhile reaches the store started again (``store_process.py``).
``checkpoint_checks.py`` states what must hold after every event and at the end.
"""

from __future__ import annotations

from raycluster.checkpoints.commits import Commits
from raycluster.checkpoints.effects import Discard, Effect, Picked, Place, Published, Record, Remove
from raycluster.checkpoints.manifest import WRITTEN
from raycluster.checkpoints.pacing import Drop, Pick, ShipQueue, Stage
from raycluster.checkpoints.parts import Complete, Part
from raycluster.checkpoints.placements import Placements
from raycluster.dsim.checkpoint_checks import Checks
from raycluster.dsim.host import Host
from raycluster.dsim.profile import INTERVAL_S, Profile, ideal_commits
from raycluster.dsim.scheduler import Scheduler
from raycluster.dsim.store_calls import StoreCalls
from raycluster.dsim.store_process import StoreProcesses
from raycluster.dsim.sweep import InvariantBroken
from raycluster.dsim.turns import Turns


class World:
    def __init__(self, seed: int, profile: Profile):
        self.sim, self.profile = Scheduler(seed, profile.network), profile
        self.commits = Commits(part_deadline_s=5 * INTERVAL_S, place_deadline_s=5 * INTERVAL_S)
        self.attempt = 1
        self.hosts = [Host(h, ShipQueue(1)) for h in range(profile.hosts)]
        self.picks: set[Pick] = set()
        self.completed: dict[str, Complete] = {}
        self.stage_failed: set[tuple[str, int]] = set()
        self.records: dict[str, int] = {}
        """The keeper's root: name -> the attempt its commit record names."""
        self.stages: list[tuple[int, int, str]] = []
        """(host, attempt, name) of every staging started."""
        self.checks = Checks()
        self._start_attempt(first_step=0, at=0.0)
        if profile.death is not None:
            host, after = profile.death
            self.sim.at(after * INTERVAL_S, lambda: self._die(host))
        self.turns = Turns(self.sim, turn_s=self.commits.place_deadline_s)  # the part store waits as long
        self.calls = StoreCalls(self.sim, self.turns, self._placed, self.commits.another_attempt_stands)
        self.stores = StoreProcesses(
            self.sim, profile, self.hosts, self.turns, lambda h, p: self.calls.placing(h, p, 0.0)
        )

    # The hosts' side: save, stage, tell the keeper.
    def _start_attempt(self, first_step: int, at: float) -> None:
        attempt, self.final = self.attempt, f"{first_step + self.profile.saves:06d}"
        for k in range(1, self.profile.saves + 1):
            name = f"{first_step + k:06d}"
            for host in self.hosts:  # ranks save the same step within a fraction of an interval of each other
                jitter = self.sim.rng.uniform(0.0, 0.05) * INTERVAL_S
                self.sim.at(at + k * INTERVAL_S + jitter, lambda h=host, n=name: self._saved(h, attempt, n))

    def _saved(self, host: Host, attempt: int, name: str) -> None:
        if not host.alive or attempt != self.attempt:
            return
        self._act(host, attempt, host.queue.saved(name))
        if host.index == 0:
            self.sim.send(lambda: self._carry_out(self.commits.saved(attempt, name, self.sim.now)[1]))

    def _act(self, host: Host, attempt: int, actions: list[Stage | Drop]) -> None:
        self.checks.touched.add(host.index)
        for action in actions:
            if isinstance(action, Stage):
                self.stages.append((host.index, attempt, action.name))
                self.stores.call(host, lambda n=action.name: self._stage(host, attempt, n))

    def _stage(self, host: Host, attempt: int, name: str) -> None:
        factor = self.profile.slow.get(host.index, self.profile.fast)
        took = factor * INTERVAL_S * self.sim.rng.uniform(0.97, 1.03)
        fails, epoch = self.sim.rng.random() < self.profile.stage_failures, host.store_epoch
        self.sim.at(took, lambda: self._staged(host, attempt, name, fails, epoch))

    def _staged(self, host: Host, attempt: int, name: str, failed: bool, epoch: int) -> None:
        if not host.alive or attempt != self.attempt:
            return
        if host.store_epoch != epoch:  # cut off by its part store's death: Ray takes the stage to the new one
            self.stores.call(host, lambda: self._stage(host, attempt, name))
            return
        if failed:  # its shipper tells the keeper, a process that lives on
            self.stage_failed.add((name, attempt))
            self.sim.send(
                lambda: self._carry_out(self.commits.failed(name, attempt, host.index, "staging failed", self.sim.now))
            )
            self._act(host, attempt, host.queue.staged(name))
            return
        # As the part store does, nothing staged; it asks at the start, under the checkpoint's lock, where a place
        # waits for the stage: here a place may come between, and fail for want of the copy (pessimistic).
        if host.placements.may_place(name, attempt) is not None:
            self._act(host, attempt, host.queue.staged(name))
            return
        host.staged.add((name, attempt))
        host.staging.add((name, attempt))
        part = Part(host.index, {f"part{host.index}": {"size": 1, WRITTEN: name}}, host.holder)
        hosts = self.profile.hosts
        self.stores.say(
            host,
            epoch,
            lambda: self._carry_out(self.commits.arrived(name, attempt, part, hosts, self.sim.now)),
            returned=lambda: (
                self._act(host, attempt, host.queue.staged(name)) if host.alive and attempt == self.attempt else None
            ),
            again=lambda: self._stage(host, attempt, name),
        )

    def _picked(self, host: Host, pick: Pick) -> None:
        if host.alive and pick.attempt == self.attempt:
            self._act(host, pick.attempt, host.queue.picked(pick))

    def _placed(self, host: Host, place: Place, epoch: int, error: str | None) -> None:
        """The place's word; the place is in flight until the keeper took it."""
        self.stores.say(
            host,
            epoch,
            lambda: self._carry_out(self.commits.placed(place.name, place.attempt, place.part, error, self.sim.now)),
            returned=lambda: host.in_flight.remove(place),
            again=None,
        )

    # The keeper's side: the very class CheckpointKeeper hosts, its effects carried out as the keeper's shell does.
    def _carry_out(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Picked):  # each host learns it at its next ask
                self.picks.add(effect.pick)
                for host in self.hosts:
                    self.sim.send(lambda h=host, p=effect.pick: self._picked(h, p))
            elif isinstance(effect, Place):
                host = self.hosts[effect.holder[0]]
                took = self.sim.rng.uniform(*self.profile.place_s)
                if self.profile.late_places and self.sim.rng.random() < self.profile.late_places:
                    deadline = self.commits.place_deadline_s
                    took = self.sim.rng.uniform(deadline, 3 * deadline)  # past a removal's wait too
                # A Ray call: late, reordered, but never twice (a death's retry aside): a repeated place would wait
                # out its turn behind a late first one and fail the checkpoint, which no real place does.
                self.sim.at(
                    self.sim.delay(),
                    lambda h=host, e=effect, t=took: self.stores.call(h, lambda: self.calls.placing(h, e, t)),
                )
            elif isinstance(effect, Discard):
                self.sim.send(
                    lambda e=effect: self.stores.call(
                        self._on(e.holder), lambda: self.calls.discard(self._on(e.holder), e)
                    )
                )
            elif isinstance(effect, Remove):
                self.sim.send(
                    lambda e=effect: self.stores.call(
                        self._on(e.holder), lambda: self.calls.remove(self._on(e.holder), e)
                    )
                )
            elif isinstance(effect, Record):
                self._record(effect)
            elif isinstance(effect, Published):
                self._published(effect)  # and a log line (``Said``) changes nothing here

    def _record(self, record: Record) -> None:
        """The keeper starts writing the record (taking ``Profile.record_s``): every part must be in place now,
        or lost with a host replaced since it placed it (a resume passes that checkpoint over, naming the host)."""
        holders = self.commits.placing[record.name].complete.parts
        for index in {entry["part"] for entry in record.record.values()}:
            replaced = self.hosts[index].holder != holders[index].holder
            if not replaced and self.hosts[index].root.get(record.name) != record.attempt:
                raise InvariantBroken(f"checkpoint {record.name}'s record written before host {index} placed its part")
        self.sim.at(self.sim.rng.uniform(*self.profile.record_s), lambda: self._recorded(record))

    def _on(self, holder: tuple[int, int]) -> Host:
        """The host a call to ``holder`` reaches; a part store replaced since reaches nothing (a host of no files)."""
        host = self.hosts[holder[0]]
        return host if host.holder == holder else Host(-1, host.queue)

    def _recorded(self, record: Record) -> None:
        self.records[record.name] = record.attempt
        self._carry_out(self.commits.recorded(record.name, record.attempt, None, self.sim.now))

    def _published(self, published: Published) -> None:
        complete = published.complete
        if complete.name in self.completed:
            raise InvariantBroken(f"checkpoint {complete.name} published twice")
        self.completed[complete.name] = complete

    # Faults.
    def _die(self, index: int) -> None:
        self.hosts[index].alive = False
        self.sim.at(self.profile.restart_s, self._restart)

    def _restart(self) -> None:
        """Ray Train restarts the worker group (the dead host replaced) from the newest committed step."""
        self.attempt += 1
        self._carry_out(self.commits.begin_attempt(self.attempt, self.sim.now))
        for host in self.hosts:
            if not host.alive:  # replaced by a new host: an empty disk, a new part store
                host.staging, host.root, host.generation = set(), {}, host.generation + 1
                host.placements, host.lost, host.deferred, host.in_flight = Placements(), set(), [], []
                host.writing = []
                self.turns.cut_off(host)  # its calls went with it
                host.store_up, host.store_epoch = True, host.store_epoch + 1
            host.alive, host.queue = True, ShipQueue(self.attempt)
        newest = max((int(n) for n in self.completed), default=0)
        self._start_attempt(first_step=newest, at=self.sim.now)

    def run(self) -> World:
        """Until nothing is left to happen (the saves are finite, and so is everything they set off)."""
        self.sim.run(float("inf"), after_each=lambda: self.checks.after_event(self))
        late = self.sim.now + max(self.commits.parts.deadline_s, self.commits.place_deadline_s) + 1
        self._carry_out(self.commits.outcome(self.final, late)[1])  # what no one asked about since is given up
        self.sim.run(float("inf"), after_each=lambda: self.checks.after_event(self))
        self.checks.at_end(self)
        return self


def paced_commits(hosts: int, slow: dict[int, float], saves: int = 200, seed: int = 1) -> tuple[int, int]:
    """Saves committed of ``saves`` at ``hosts`` hosts (``slow``: host -> staging time in save intervals, every
    other host within one), beside the most any protocol could commit (the bench's and the tests' figure)."""
    world = World(seed, Profile(hosts=hosts, saves=saves, slow=slow)).run()
    return len(world.completed), ideal_commits(saves, max(slow.values(), default=Profile.fast))
