"The quickstart path end to end on the embedded corpus (shortened), through the console script."
import re, subprocess, sys
from pathlib import Path
import pytest
from conftest import read_events

ENGLISH = {"the", "of", "is", "a", "to", "and", "in", "for", "object", "function", "return", "value", "module", "be", "if"}

@pytest.mark.slow
def test_quickstart_runs_and_prints_english(tmp_path):
    exe = Path(sys.executable).parent / "mdlm-kit"
    out = tmp_path / "qs"
    r = subprocess.run([str(exe), "quickstart", "--output-dir", str(out), "--max-steps", "30", "--no-progress",
                        "--set", "training.eval_interval=15", "--set", "model.n_layer=2"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("=== sample") == 3
    words = set(re.findall(r"[a-z]+", r.stdout.split("=== sample", 1)[1].lower()))
    assert len(words & ENGLISH) >= 3, r.stdout
    vals = [e["elbo_nats_per_token"] for e in read_events(out, "validation")]
    assert len(vals) == 2 and vals[1] < vals[0]                       # the bound goes down
    assert (out / "inference" / "model.safetensors").is_file()
    # running it again reuses the finished run instead of retraining or failing
    r2 = subprocess.run([str(exe), "quickstart", "--output-dir", str(out), "--no-progress"], capture_output=True, text=True, timeout=600)
    assert r2.returncode == 0 and "already holds a finished quickstart run" in r2.stdout, r2.stderr[-2000:]
