"""Trials trained on several processes (torchrun / DDP), against a real
hypertuned: every rank attaches to the one trial the worker holds (the
HYPERTUNE_* environment, as `hypertune worker` sets it); only rank 0
(RANK, else LOCAL_RANK) reports and completes, and every rank learns of a
stop at the same step. torch is not needed: the ranks are two plain
Python processes, synchronised per step by files as DDP's collectives
would; where torch is installed, by torch.distributed's own (gloo, on the
CPU) too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import hypertune
from helpers import study_config, unique_name

MEDIAN = {"rule": "MEDIAN", "min_trials": 3, "grace_steps": 1}

# One rank of a training: reports a poor loss each step (rank 1 a
# different one: its shard), and stops once should_stop says so. The ranks
# step together: each waits at a file barrier for the other's step, as a
# DDP all-reduce would make them.
RANK_SCRIPT = """
    import json, os, sys, time
    import hypertune

    barrier = sys.argv[1]
    rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
    other = 1 - rank

    def meet(step):
        open(os.path.join(barrier, f"{rank}-{step}"), "w").close()
        while not os.path.exists(os.path.join(barrier, f"{other}-{step}")):
            time.sleep(0.01)

    if os.environ.get("SYNC") == "gloo":  # torch's own collectives, on the CPU
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + os.path.join(barrier, "store"),
                                rank=rank, world_size=2)

        def meet(step):
            dist.barrier()

    trial = hypertune.current_trial()
    stopped_at = None
    with trial:
        for step in range(1, 11):
            meet(step)
            trial.report(step, loss=5.0 + rank)
            if trial.should_stop:
                stopped_at = step
                break
        trial.complete(loss=5.0 + rank)
    print(json.dumps({"rank": trial.rank, "stopped_at": stopped_at}), flush=True)
"""


@pytest.mark.parametrize("variable, sync", [
    ("RANK", "files"), ("LOCAL_RANK", "files"), ("RANK", "gloo")])
def test_rank_0_reports_and_every_rank_stops_at_the_same_step(
        client, server, tmp_path, variable, sync) -> None:
    if sync == "gloo":
        pytest.importorskip("torch", reason="python3-torch is not installed; the ranks "
                                            "synchronised by files cover the rank logic")
    study = client.create_study(study_config(unique_name("ranks"), early_stopping=MEDIAN))
    for _ in range(3):  # a history the median rule judges against
        good = study.ask()
        for step in range(1, 5):
            good.report(step, loss=1.0 / step)
        good.complete(loss=0.25)
    trial = study.ask()  # the worker's lease
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(RANK_SCRIPT))
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
               HYPERTUNE_SERVER=server.address, HYPERTUNE_STUDY=study.name,
               HYPERTUNE_TRIAL_ID=str(trial.id), HYPERTUNE_LEASE_EPOCH=str(trial.lease_epoch),
               HYPERTUNE_CLIENT_ID=trial.client_id, SYNC=sync)
    for name in ("RANK", "LOCAL_RANK"):
        env.pop(name, None)
    ranks = [
        subprocess.Popen([sys.executable, str(script), str(barrier)],
                         env={**env, variable: str(rank)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for rank in (0, 1)
    ]
    results = []
    for process in ranks:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    assert [r["rank"] for r in results] == [0, 1]
    stopped_at = results[0]["stopped_at"]
    assert stopped_at is not None and stopped_at < 10
    assert results[1]["stopped_at"] == stopped_at

    stored = study.trial(trial.id)
    assert stored.state == "STOPPED"
    # Rank 0's reports alone (rank 1's loss was 6.0), its completion too.
    assert [(m.step, m.metrics) for m in stored.measurements] == [
        (step, {"loss": 5.0}) for step in range(1, stopped_at + 1)]
    assert stored.metrics == {"loss": 5.0}
    trial._lease.stop()


def test_rank_defaults_to_0(monkeypatch, client) -> None:
    from hypertune.trial import rank_from_env

    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert rank_from_env() == 0
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert rank_from_env() == 3
    monkeypatch.setenv("RANK", "5")
    assert rank_from_env() == 5
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(hypertune.InvalidArgumentError, match="RANK: 'x' is not an integer"):
        rank_from_env()
