"""torch.distributed for the MDLM, on the CPU with gloo: two processes under `torchrun` train to the weights one
process reaches with both their batches, and only the first process writes the run. A two-process run killed with
SIGKILL at random moments resumes exactly: the `ddp` job of tools/fault_inject.py (tests/test_faults.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import read_events

MDLM_KIT = Path(sys.executable).parent / "mdlm-kit"


def mdlm_kit(args, processes: int = 1):
    "`mdlm-kit ARGS`, as one process or under `torchrun --nproc-per-node processes` (one thread each)."
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"]
    cmd = (launch if processes > 1 else []) + [str(MDLM_KIT), *map(str, args)]
    r = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"},
    )
    # a torchrun failure prints its workers' stacks (PYTHONFAULTHANDLER) before its own traceback: keep both
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    return r


def weights(run: Path, step: int = 6) -> dict:
    return torch.load(run / "checkpoints" / f"step_{step:08d}.pt", weights_only=True)["model"]


@pytest.mark.slow
def test_two_processes_train_what_one_process_trains_with_both_batches(tmp_path, tiny_config):
    train = ["train", "--config", tiny_config, "--no-progress"]
    mdlm_kit([*train, "--output-dir", tmp_path / "one", "--set", "training.batch_size=4"])
    mdlm_kit([*train, "--output-dir", tmp_path / "two", "--set", "training.batch_size=2"], processes=2)
    one, two = weights(tmp_path / "one"), weights(tmp_path / "two")
    for k in one:
        torch.testing.assert_close(two[k], one[k], atol=2e-5, rtol=1e-4, msg=k)
    # one log, one set of checkpoints, written by the first process alone
    assert [e["step"] for e in read_events(tmp_path / "two", "train")] == [1, 2, 3, 4, 5, 6]
    assert len(read_events(tmp_path / "two", "complete")) == 1
