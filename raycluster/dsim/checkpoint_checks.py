"""What must hold in the checkpoint simulation (``checkpoints.py``'s ``World``): after every event, what changed
since the last check, and once nothing is left to happen, the end state. Each raises ``InvariantBroken``."""

from __future__ import annotations

from raycluster.checkpoints.pacing import Pick
from raycluster.dsim.sweep import InvariantBroken


class Checks:
    def __init__(self) -> None:
        self.checked_stages = self.checked_commits = 0
        self.touched: set[int] = set()
        """Hosts whose shipping queue changed since the last check."""

    def after_event(self, world) -> None:
        """After every event: what changed since the last check (each commit is checked once, when it comes)."""
        for name in list(world.completed)[self.checked_commits :]:
            complete = world.completed[name]
            if sorted(complete.parts) != list(range(world.profile.hosts)):
                raise InvariantBroken(f"checkpoint {name} committed with parts {sorted(complete.parts)}")
            for index in complete.parts:
                if (name, complete.attempt) not in world.hosts[index].staged:
                    raise InvariantBroken(f"checkpoint {name} names a part host {index} never staged")
        self.checked_commits = len(world.completed)
        for index, attempt, name in world.stages[self.checked_stages :]:
            if Pick(attempt, name) not in world.picks:
                raise InvariantBroken(f"host {index} staged {name} of attempt {attempt}, which no pick named")
        self.checked_stages = len(world.stages)
        for index in self.touched:
            queue = world.hosts[index].queue
            if len(queue.held) + (queue.busy is not None) > queue.keep + 2:
                raise InvariantBroken(f"host {index} holds more than {queue.keep + 2} saves: {queue.held}")
        self.touched.clear()

    def at_end(self, world) -> None:
        """Once nothing is left to happen: every part staged is decided, committed or given up, and placed or
        removed; the last attempt's last save is committed unless a host's staging of it failed (training never
        ends on a lost save); no host holds a save any more; and no host's root holds what no record names."""
        if world.commits.parts.pending_names() or world.commits.placing:
            pending = sorted(world.commits.parts.pending_names() | set(world.commits.placing))
            raise InvariantBroken(f"checkpoints still pending at the end: {pending}")
        final = world.completed.get(world.final)
        if (final is None or final.attempt != world.attempt) and (world.final, world.attempt) not in world.stage_failed:
            raise InvariantBroken(f"the last save, {world.final} of attempt {world.attempt}, was not committed")
        for host in world.hosts:
            if host.queue.held or host.queue.busy:
                raise InvariantBroken(f"host {host.index} still holds saves {host.queue.held} at the end")
            if host.staging:
                raise InvariantBroken(f"host {host.index} still stages {sorted(host.staging)} at the end")
            orphans = [n for n, a in host.root.items() if n not in world.completed or world.completed[n].attempt != a]
            if orphans:
                raise InvariantBroken(f"host {host.index}'s root holds {orphans}, which no record names")
        failed = [n for n, a in world.records.items() if n not in world.completed or world.completed[n].attempt != a]
        if failed:
            raise InvariantBroken(f"records written for {failed}, which the keeper gave up: committed and failed")
        for name, complete in world.completed.items():  # no late word took a committed part from its host's root
            for index, part in complete.parts.items():
                host = world.hosts[index]
                if host.holder == part.holder and host.root.get(name) != complete.attempt:
                    raise InvariantBroken(f"committed checkpoint {name} lost host {index}'s part from its root")
