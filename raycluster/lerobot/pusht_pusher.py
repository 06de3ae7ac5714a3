"""The scripted pusher that records the PushT dataset (``pusht_dataset.py``), in the real ``gym_pusht`` env.

The pusher reads the block's pose from the simulator and pushes one point of the T's outline straight into the
block: the point whose push moves the block's pose most toward the goal's, position and angle together. With
the env's zero space damping the block moves only while touched (quasi-static), so how far the agent presses in
sets how far the block goes, and re-choosing the point as the block moves corrects translation and rotation.
"""

from __future__ import annotations

import numpy as np

AGENT_RADIUS = 15.0
COG = np.array([0.0, 45.0])  # the T's centre of gravity in its body frame (gym_pusht's add_tee)
ORBIT = 115.0  # px from the T's centre: clear of its farthest corner (75) by more than the agent's radius
ARENA = (25.0, 487.0)  # inside the walls at 5 and 506, with room for the agent's radius


def _outline() -> list[tuple[np.ndarray, np.ndarray]]:
    """Push points on the T's outline with their outward normals, in its body frame. Points stay 10 px or more
    from a concave corner, so an agent on the normal fits beside the stem and under the bar."""
    points = [((x, 0), (0, -1)) for x in (-50, -25, 0, 25, 50)] + [((0, 120), (0, 1))]
    for side in (1, -1):
        points.append(((side * 60, 15), (side, 0)))
        points += [((side * x, 30), (0, 1)) for x in (40, 52)]
        points += [((side * 15, y), (side, 0)) for y in (55, 80, 105)]
    return [(np.array(p, dtype=float), np.array(n, dtype=float)) for p, n in points]


def _rotation(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


def _wrap(angle: float) -> float:
    return (angle + np.pi) % (2 * np.pi) - np.pi


class ScriptedPusher:
    """Picks the outline point whose straight push best reduces the pose error, walks around the T to it without
    touching it, then presses in by as much as that error is worth. One instance per episode: it keeps its point."""

    def __init__(self, env) -> None:
        self.env = env.unwrapped
        self.outline = _outline()
        self.point: int | None = None
        self.way: float | None = None  # which way round the T the agent walks: +1 counterclockwise

    def _pose(self) -> tuple[np.ndarray, float, np.ndarray]:
        block = self.env.block
        return np.array(block.position), float(block.angle), np.array(block.position) + _rotation(block.angle) @ COG

    def _scores(self) -> np.ndarray:
        """Per outline point: translation toward the goal plus torque toward its angle (a px of lever per px of
        travel: a T's radius of gyration is ~60 px, so a radian of angle weighs about as much as 60 px)."""
        position, angle, cog = self._pose()
        goal = self.env.goal_pose
        error_xy = goal[:2] + _rotation(goal[2]) @ COG - cog
        error_angle = _wrap(goal[2] - angle)
        scores = np.empty(len(self.outline))
        for i, (point, normal) in enumerate(self.outline):
            at, push = position + _rotation(angle) @ point, -(_rotation(angle) @ normal)
            lever = at - cog
            torque = lever[0] * push[1] - lever[1] * push[0]
            start = at - push * (AGENT_RADIUS + 4)
            reachable = np.all((start > ARENA[0]) & (start < ARENA[1]))
            scores[i] = push @ error_xy + torque * error_angle if reachable else -np.inf
        return scores

    def act(self) -> np.ndarray:
        scores = self._scores()
        best = int(np.argmax(scores))
        # Hysteresis: switching point for a marginally better one would send the agent around the T every step.
        if self.point is None or scores[self.point] <= 0 or scores[self.point] < 0.7 * scores[best]:
            self.point = best
        position, angle, cog = self._pose()
        point, normal = self.outline[self.point]
        at, normal = position + _rotation(angle) @ point, _rotation(angle) @ normal
        offset = np.array(self.env.agent.position) - at
        along, lateral = offset @ normal, abs(offset @ np.array([-normal[1], normal[0]]))
        if AGENT_RADIUS - 10 < along < AGENT_RADIUS + 8 and lateral < 6:
            # In contact: the block moves about as far as the agent's target lies inside it.
            depth = min(12.0, 0.5 * max(float(scores[self.point]), 0.0) + 2.0)
            target = at + normal * (AGENT_RADIUS - depth)
        else:
            target = self._approach(at + normal * (AGENT_RADIUS + 4), cog)
        return np.clip(target, 0, 512).astype(np.float32)

    def _approach(self, start: np.ndarray, cog: np.ndarray) -> np.ndarray:
        """Straight to the push's start if the agent's path there misses the T, else along a circle around it."""
        import pymunk

        agent = np.array(self.env.agent.position)
        hits = self.env.space.segment_query(tuple(agent), tuple(start), AGENT_RADIUS + 2, pymunk.ShapeFilter())
        if not any(hit.shape.body is self.env.block for hit in hits):
            self.way = None
            return start
        here, there = agent - cog, start - cog
        now = np.arctan2(here[1], here[0])
        turn = _wrap(np.arctan2(there[1], there[0]) - now)
        if self.way is None:
            self.way = np.sign(turn) or 1.0
        bearing = now + self.way * (min(abs(turn), 0.7) if np.sign(turn) == self.way else 0.7)
        waypoint = np.clip(cog + ORBIT * np.array([np.cos(bearing), np.sin(bearing)]), *ARENA)
        if np.linalg.norm(waypoint - agent) < 3:
            # Parked where the wall cuts the circle: the T is too close to that wall to pass, go the other way.
            self.way = -self.way
        return waypoint
