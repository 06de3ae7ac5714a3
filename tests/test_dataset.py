import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from raycluster.errors import UsageError
from raycluster.lerobot.dataset import CAMERA_KEY, SyntheticDatasetSpec, make_synthetic_dataset


def test_synthetic_dataset_loads_with_lerobot_and_is_learnable(dataset):
    loaded = LeRobotDataset(dataset.repo_id, root=dataset.root)
    assert loaded.num_episodes == dataset.episodes
    assert loaded.num_frames == dataset.episodes * dataset.frames
    assert loaded.meta.info.codebase_version == "v3.0"
    frame, following = loaded[0], loaded[1]
    assert frame["observation.state"].shape == (6,) and frame["action"].shape == (6,)
    assert frame[CAMERA_KEY].shape == (3, dataset.image_size, dataset.image_size)
    # The action is where the arm goes next: a policy can learn it from the state.
    np.testing.assert_allclose(frame["action"].numpy(), following["observation.state"].numpy(), rtol=1e-6)


def test_existing_root_is_refused_without_touching_it(dataset):
    before = sorted(p.name for p in dataset.root.iterdir())
    with pytest.raises(UsageError, match="--root .* already exists"):
        make_synthetic_dataset(SyntheticDatasetSpec(root=dataset.root))
    assert sorted(p.name for p in dataset.root.iterdir()) == before
