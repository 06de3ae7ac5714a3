"""A SageMaker job of two instance groups on simulated hosts: training on the ``train`` group, every checkpoint
evaluated on the ``eval`` group's host, which the entry point offers to Ray as ``group:eval``."""

from __future__ import annotations

import json
import re

import pytest

from conftest import TINY_ACT_HPS
from simulated import assert_clean

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def test_evaluations_run_on_the_eval_groups_host_only(job, tmp_path):
    hps = {
        **TINY_ACT_HPS,
        "steps": 4,
        "save_freq": 2,
        "log_freq": 2,
        "cluster__num_workers": 2,
        "dataset__eval_split": 0.25,
        "cluster__async_eval": True,
        "cluster__eval_resources": '{"group:eval": 1}',
    }
    groups = ["--instance-group=train=ml.c5.xlarge:2", "--instance-group=eval=ml.c5.xlarge:1"]
    sim = job(tmp_path, 3, hps, *groups)
    result = sim.finish()
    assert all(h["exit_code"] == 0 for h in result.values()), (result, sim.output()[-3000:])
    config = json.loads((tmp_path / "algo-3" / "opt" / "ml" / "input" / "config" / "resourceconfig.json").read_text())
    assert config["current_group_name"] == "eval"
    assert [g["hosts"] for g in config["instance_groups"]] == [["algo-1", "algo-2"], ["algo-3"]]
    subnet = re.search(r"sim: 3 hosts on (\S+)\.0/24", sim.output()).group(1)
    address = {f"algo-{k}": f"{subnet}.{10 + k}" for k in (1, 2, 3)}
    summary = json.loads((tmp_path / "algo-1" / "opt" / "ml" / "model" / "raycluster_summary.json").read_text())
    evaluations = summary["evaluations"]
    assert [e["step"] for e in evaluations] == [2, 4] and all(e["status"] == "VALIDATED" for e in evaluations)
    # Where Ray placed each task: the eval group's host, never a training host.
    assert {e["node"] for e in evaluations} == {address["algo-3"]}, evaluations
    assert all(e["metrics"]["eval_loss"] > 0 and e["metrics"]["eval_frames"] == 60 for e in evaluations)
    assert_clean()
