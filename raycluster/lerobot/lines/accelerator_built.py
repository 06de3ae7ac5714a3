"""LeRobot main (its next release): ``train(cfg)`` builds its own Accelerator (``make_accelerator``) from
``--parallelism.*`` and ``--accelerator.*`` on the process group Ray Train made, reading ``WORLD_SIZE``,
exactly as under ``torchrun``. Every such flag goes to LeRobot verbatim; ours only fill what was not given."""

from __future__ import annotations

from collections import Counter

from raycluster.errors import UsageError
from raycluster.lerobot.api import flag_value, lerobot_argv
from raycluster.lerobot.lines import LineSettings, Placement

PRECISION = "accelerator.mixed_precision"
REPLICATE, SHARD = "parallelism.dp_replicate", "parallelism.dp_shard"


def given_degree(args: list[str], name: str) -> int | None:
    text = flag_value(args, name)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"--{name}={text}: a whole number (-1: all ranks left over)") from None


def host_blocks(hosts: list[str]) -> dict[str, int]:
    """Ranks per host, in rank order; refused unless each host's ranks are one contiguous block (a shard
    group of consecutive ranks then never spans two hosts)."""
    order = [host for i, host in enumerate(hosts) if i == 0 or hosts[i - 1] != host]
    if len(order) != len(set(order)):
        raise UsageError(f"Ray Train placed ranks on hosts {hosts}: not one contiguous block per host")
    return dict(Counter(hosts))


def sharding_degrees(sharding: str, hosts: list[str]) -> dict[str, int]:
    """``fsdp``: one shard group over every rank. ``hsdp``: shard inside a host (NVLink), replicate across
    hosts (EFA), which needs the same number of ranks on every host."""
    if sharding == "fsdp":
        return {REPLICATE: 1, SHARD: len(hosts)}
    per_host = host_blocks(hosts)
    if len(set(per_host.values())) != 1:
        raise UsageError(
            f"--cluster.sharding=hsdp needs the same number of workers on every host, got {per_host}: "
            "give every host the same GPUs (or set --parallelism.dp_shard/dp_replicate yourself)"
        )
    return {REPLICATE: len(per_host), SHARD: len(hosts) // len(per_host)}


def complement(args: list[str], world: int) -> dict[str, int] | None:
    """The degree the user left out when they gave one: the world size over theirs (16 ranks, ``dp_shard=4``:
    ``dp_replicate=4``), as LeRobot refuses degrees whose product is not the world size. None: they gave
    neither (or only LeRobot's ``dp_shard=-1``, which it fills from our dp_replicate), so ours fill them."""
    replicate, shard = given_degree(args, REPLICATE), given_degree(args, SHARD)
    if replicate is None and shard in (None, -1):
        return None
    if replicate is not None and shard is not None:
        return {}
    name, degree, missing = (REPLICATE, replicate, SHARD) if shard is None else (SHARD, shard, REPLICATE)
    if degree < 1:  # LeRobot refuses it itself, naming it
        return {}
    if world % degree:
        raise UsageError(
            f"--{name}={degree} does not divide the {world} workers (--cluster.num_workers): give a divisor "
            f"of {world}, or --{missing} too so that the product is {world}"
        )
    return {missing: world // degree}


class AcceleratorBuilt:
    name = "LeRobot main (train(cfg), --parallelism.*)"
    saves_on_every_rank = True

    def plan_args(self, args: list[str], cluster: LineSettings) -> list[str]:
        given = flag_value(args, PRECISION)
        if cluster.mixed_precision != "auto" and given is not None:
            raise UsageError(
                f"--cluster.mixed_precision={cluster.mixed_precision} and --{PRECISION}={given} both given: "
                f"LeRobot main takes its precision from --{PRECISION}; drop --cluster.mixed_precision"
            )
        if cluster.mixed_precision in ("fp16", "bf16"):  # `no` is LeRobot's default (and YAML reads it as false)
            args = [*args, f"--{PRECISION}={cluster.mixed_precision}"]
        replicate, shard = given_degree(args, REPLICATE), given_degree(args, SHARD)
        if replicate and shard and replicate > 0 and shard > 0 and replicate * shard != cluster.num_workers:
            raise UsageError(
                f"--{REPLICATE}={replicate} x --{SHARD}={shard} = {replicate * shard} ranks, but "
                f"--cluster.num_workers={cluster.num_workers}: make the product the number of workers"
            )
        if cluster.sharding != "none":  # refused here, before any worker, rather than on every rank
            complement(args, cluster.num_workers)
        return args

    def check_config(self, cfg, cluster: LineSettings) -> None:
        # The resolved config, not the flag: `checkpoint_format: dcp` may come from a --config_path file.
        if cluster.model_dir and getattr(cfg.checkpoint_format, "value", cfg.checkpoint_format) == "dcp":
            raise UsageError(
                f"--checkpoint_format=dcp with --cluster.model_dir={cluster.model_dir} (from the flags or the "
                "--config_path file): a dcp checkpoint has no model.safetensors, so the model dir would hold "
                "nothing from_pretrained loads; use safetensors (the default) or safetensors_dcp"
            )

    def worker_args(self, args: list[str], hosts: list[str], sharding: str) -> list[str]:
        if sharding == "none":
            return args
        degrees = complement(args, len(hosts))
        if degrees is None:
            degrees = sharding_degrees(sharding, hosts)
        return [*args, *(f"--{name}={value}" for name, value in degrees.items() if flag_value(args, name) is None)]

    def precision(self, cfg, placement: Placement) -> str:
        return str(cfg.accelerator.mixed_precision)

    def train(self, cfg, args: list[str], placement: Placement) -> None:
        from lerobot.scripts import lerobot_train

        with lerobot_argv(args):
            lerobot_train.train(cfg)
