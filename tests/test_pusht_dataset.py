import gym_pusht  # noqa: F401  (registers gym_pusht/PushT-v0)
import gymnasium as gym
import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.envs.configs import PushtEnv

from raycluster.errors import UsageError
from raycluster.lerobot.pusht_dataset import ENV_ID, PushTDatasetSpec, make_pusht_dataset

# Seeds 2 and 3 start with the T off its target (reward < 0.01); in 60 steps the pusher brings each to ~0.33.
SEED, STEPS = 2, 60


@pytest.mark.parametrize("obs_type", ["environment_state_agent_pos", "pixels_agent_pos"])
def test_recorded_episodes_load_with_the_features_lerobots_pusht_env_maps_to(tmp_path, obs_type):
    spec = PushTDatasetSpec(root=tmp_path / "pusht", episodes=2, max_steps=STEPS, obs_type=obs_type, seed=SEED)
    assert make_pusht_dataset(spec) == spec.root
    loaded = LeRobotDataset(spec.repo_id, root=spec.root)
    assert (loaded.num_episodes, loaded.num_frames, loaded.fps) == (2, 2 * STEPS, PushtEnv.fps)

    env = gym.make(ENV_ID, obs_type=obs_type)
    first_obs, _ = env.reset(seed=SEED)
    # Every observation the env gives lands, at its shape, under the key LeRobot's eval maps it to.
    for name, space in env.observation_space.spaces.items():
        key = PushtEnv().features_map[name]
        assert loaded.meta.features[key]["shape"] == space.shape
    assert loaded.meta.features["action"]["shape"] == env.action_space.shape

    frames = [loaded[i] for i in range(len(loaded))]
    frame = frames[0]
    assert frame["observation.state"].shape == (2,) and frame["action"].shape == (2,)
    if obs_type == "pixels_agent_pos":
        assert frame["observation.image"].shape == (3, 96, 96)
    else:
        assert frame["observation.environment_state"].shape == (16,)
        np.testing.assert_allclose(frame["observation.environment_state"], first_obs["environment_state"], rtol=1e-5)
    # A frame holds the observation its action was chosen from: the first is the reset's.
    np.testing.assert_allclose(frame["observation.state"], first_obs["agent_pos"], rtol=1e-5)
    actions = np.stack([f["action"].numpy() for f in frames])
    assert np.all((actions >= env.action_space.low) & (actions <= env.action_space.high))

    rewards = {ep: [float(f["next.reward"]) for f in frames if f["episode_index"] == ep] for ep in (0, 1)}
    assert rewards[0][0] < 0.01 and rewards[1][0] < 0.01
    assert max(max(r) for r in rewards.values()) > 0.2  # the pusher moves the T onto its target


def test_existing_root_is_refused_without_touching_it(tmp_path):
    root = tmp_path / "pusht"
    root.mkdir()
    (root / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="--root .* already exists"):
        make_pusht_dataset(PushTDatasetSpec(root=root, episodes=1, max_steps=5))
    assert [p.name for p in root.iterdir()] == ["keep.txt"] and (root / "keep.txt").read_text() == "mine"
