"""What the GPU path configures, checked here; the path itself runs where a GPU is."""

import subprocess

import pytest
import torch

from conftest import REPO, TINY_ACT
from raycluster.lerobot.api import parse_train_config
from raycluster.lerobot.lines.accelerator_given import mixed_precision


def test_mixed_precision_follows_lerobots_own_flags(tmp_path):
    flags = ["--dataset.repo_id=x/y", *TINY_ACT, f"--output_dir={tmp_path}/o"]
    assert mixed_precision(parse_train_config(flags, validate=False), use_gpu=True) is None
    amp = parse_train_config([*flags, "--policy.use_amp=true"], validate=False)
    assert mixed_precision(amp, use_gpu=True) == "fp16"  # torch's CUDA autocast default


@pytest.mark.slow
def test_gpu_check_script_runs_in_its_reduced_cpu_form():
    result = subprocess.run(
        ["bash", "bench/gpu_check.sh", "--cpu"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "ratio raycluster/plain samples/s:" in result.stdout
    assert "gloo" in result.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_check_script_on_gpu():
    result = subprocess.run(["bash", "bench/gpu_check.sh"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "nccl" in result.stdout and "bf16" in result.stdout
