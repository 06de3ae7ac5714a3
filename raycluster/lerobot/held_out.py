"""The loss on held-out episodes, computed as LeRobot's training loop computes its ``eval_loss``."""

from __future__ import annotations

from raycluster.lerobot.policy_loading import load_policy


def held_out_datasets(cfg):
    """LeRobot's own split (the last ``ceil(n * eval_split)`` episodes of each task): the same episodes the
    run held out, rebuilt from its saved config."""
    from lerobot.datasets.factory import make_train_eval_datasets

    _, held_out = make_train_eval_datasets(cfg)
    return held_out


def eval_loader(cfg, dataset):
    """lerobot_train.py's eval loader (0.6.1, its ``train``): ``--max_eval_samples`` per task, in order, whole."""
    import torch
    from lerobot.utils.collate import lerobot_collate_fn

    chosen = dataset
    if cfg.max_eval_samples > 0 and hasattr(dataset, "hf_dataset"):
        tasks = dataset.hf_dataset.data.column("task_index").to_numpy()
        unique = sorted(set(tasks.tolist()))
        per_task = max(1, cfg.max_eval_samples // len(unique))
        selected = [i for t in unique for i in (tasks == t).nonzero()[0][:per_task].tolist()]
        chosen = torch.utils.data.Subset(dataset, selected)
    return torch.utils.data.DataLoader(
        chosen,
        batch_size=cfg.batch_size,
        shuffle=False,
        num_workers=0,  # inside a task that holds the CPUs it asked for, not the run's loader processes
        drop_last=False,
        collate_fn=lerobot_collate_fn if dataset.meta.has_language_columns else None,
    )


def held_out_loss(cfg, device: str) -> dict[str, float]:
    """``eval_loss`` (the mean of the batches' losses) and how many frames it saw. LeRobot's loop is inline in
    its ``train`` (lerobot_train.py, "if is_eval_step"), so it is repeated here, line for line; a test pins it
    against LeRobot's own ``step N: eval_loss=`` line. At one rank they are equal; LeRobot averages each rank's
    mean over its own shard of the batches, this one takes every batch in one process."""
    import torch

    dataset = held_out_datasets(cfg)
    loaded = load_policy(cfg, device, ds_meta=dataset.meta)
    total, batches, frames = 0.0, 0, 0
    with torch.no_grad():
        for batch in eval_loader(cfg, dataset):
            for key in dataset.meta.camera_keys:
                if key in batch and batch[key].dtype == torch.uint8:
                    batch[key] = batch[key].to(dtype=torch.float32) / 255.0
            frames += len(batch["index"])
            batch = loaded.preprocessor(batch)
            loss, _ = loaded.policy.forward(batch)
            total += loss.item()
            batches += 1
    return {"eval_loss": total / max(batches, 1), "eval_frames": float(frames)}
