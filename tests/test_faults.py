"Fault injection (slow): SIGKILL every long-running command at random moments; resumes lose nothing and end bit-equal."

import sys
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import fault_inject


@pytest.mark.slow
@pytest.mark.parametrize("job", ["mdlm", "ddp", "dflash", "eagle3", "chat", "features"])
def test_kill_and_resume_loses_nothing(job, capsys):
    # 2 kills per job here, each at a random moment of what is left of the run (the full 20-kill run is
    # `python tools/fault_inject.py`; see bench/README.md)
    fault_inject.main(["--kills", "2", "--jobs", job, "--seed", "1"])
    out = capsys.readouterr().out
    assert f"{job:9s} ok" in out and "matched the uninterrupted run" in out
