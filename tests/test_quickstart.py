"The quickstart path end to end on the embedded corpus (shortened), through the console script: it must learn."

import json, re, subprocess, sys
from pathlib import Path
import pytest
from conftest import read_events

ROOT = Path(__file__).resolve().parents[1]

# a shortened run, a quarter of the default's 2,400 steps of 8 blocks: long enough to leave the unigram behind (on an
# AMD EPYC with AVX-512 the whole-split bound was 1.02x the unigram entropy at 400 steps, 0.98x at 600, 0.95x at 800),
# short enough for the test suite; it evaluates twice, halfway and at the end
STEPS = 600


def sample_bodies(stdout: str) -> dict[str, str]:
    "What the quickstart generated, between its sample markers, without the prompt: never the headers around it."
    found = re.findall(r"=== sample \((.*?)\) ===\n(.*?)\n=== end of sample ===", stdout, re.S)
    bodies = {}
    for title, body in found:
        prompt = re.search(r"prompt '([^']*)'", title)
        bodies[title] = body[len(prompt.group(1)) :] if prompt and body.startswith(prompt.group(1)) else body
    return bodies


def _run(args: list, timeout: int) -> subprocess.CompletedProcess:
    "`mdlm-kit ARGS` through the console script, as a user types it."
    exe = Path(sys.executable).parent / "mdlm-kit"
    r = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.mark.slow
def test_quickstart_learns(tmp_path):
    """The quickstart's model and data, trained a quarter of its steps: its bound on the whole validation split (scored
    by `mdlm-kit eval`, as `--baseline` scores it) falls below the unigram entropy, and its samples are words."""
    from mdlm_kit.text.data import PackedData, known_word_fraction

    out = tmp_path / "qs"
    r = _run(
        ["quickstart", "--output-dir", out, "--max-steps", STEPS, "--no-progress"]
        + ["--set", f"training.eval_interval={STEPS // 2}"],
        timeout=1500,
    )
    vals = [e["elbo_nats_per_token"] for e in read_events(out, "validation")]
    assert len(vals) == 2 and vals[1] < vals[0]
    assert f"step {STEPS:>5}: {vals[1]:.3f}" in r.stdout
    bodies = sample_bodies(r.stdout)
    assert len(bodies) == 3, r.stdout  # the quickstart's three diffusion samples
    words = PackedData(out / "data").words("train")
    text = "\n".join(bodies.values())  # this early one sampler may still repeat a symbol (">>>>"): judge them together
    assert len(re.findall(r"[A-Za-z]{3,}", text)) >= 15, bodies
    assert known_word_fraction(text, words) >= 0.6, bodies  # words, not glued fragments (unigram noise: about 0.4)
    e = json.loads(
        _run(["eval", "--checkpoint", out / "inference", "--data", out / "data", "--split", "val", "--levels", 8], 600)
        .stdout.strip()
        .splitlines()[-1]
    )
    # 8 levels (and 4 for the quadrature's error) take half the time of 16: on a 600-step model they gave 6.034
    # nats/token against 6.036 at 16 levels, far inside the margin to 0.99x the unigram entropy (about 0.05)
    assert e["objective"] == "mdlm" and e["split"] == "val" and e["n_levels"] == 8
    assert e["nats_per_token"] < 0.99 * e["unigram_nats_per_token"], e  # it uses context: below the unigram entropy
    assert e["quadrature_error"] < 0.02, e


@pytest.mark.slow
def test_quickstart_baseline_compares_and_reuses(tmp_path):
    """`quickstart --baseline` on a tiny config: the AR twin trains beside the MDLM on the same packed data, both are
    scored on the validation split into comparison.json and printed, and a second run reuses both runs and that very
    comparison. (Which model wins at the quickstart's budget is a result: bench/README.md.)"""
    from mdlm_kit.text.data import reference_topics

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(list(reference_topics().values())[:12]), encoding="utf-8")
    out = tmp_path / "qs"
    args = ["quickstart", "--config", ROOT / "configs" / "tiny.toml", "--output-dir", out, "--baseline"]
    args += ["--corpus", corpus, "--no-progress", "--set", "model.max_seq_len=128", "--max-steps", 12]
    r = _run(args, timeout=600)
    c = json.loads((out / "comparison.json").read_text())
    mdlm, ar = c["mdlm"], c["ar"]
    assert c["mdlm_over_ar"] == mdlm["nats_per_token"] / ar["nats_per_token"]
    assert c["mdlm_over_unigram"] == mdlm["nats_per_token"] / c["unigram_nats_per_token"]
    assert mdlm["n_tokens"] == ar["n_tokens"] > 0 and mdlm["n_levels"] == 16  # one split, the same tokens
    for m in (mdlm, ar):
        assert f"{m['nats_per_token']:.3f}" in r.stdout and f"{m['bits_per_char']:.3f}" in r.stdout
    assert f"MDLM / AR = {c['mdlm_over_ar']:.2f}x" in r.stdout
    assert len(sample_bodies(r.stdout)) == 4, r.stdout  # three diffusion samples, one from the AR baseline
    ar_cfg = (out / "ar" / "config.toml").read_text()
    assert 'objective = "ar"' in ar_cfg and f"data_dir = {json.dumps(str(out / 'data'))}" in ar_cfg
    for run in (out, out / "ar"):
        assert (run / "inference" / "model.safetensors").is_file()
        assert [e["step"] for e in read_events(run, "complete")] == [12]
    # running it again reuses both finished runs instead of retraining or failing
    r2 = _run(args[:-2], timeout=600)
    assert r2.stdout.count("already holds a finished") == 2, r2.stdout
    # and the comparison of those very weights: read back, not scored again, the same figures printed
    assert "reusing " in r2.stdout and "comparison.json: it scored these very weights" in r2.stdout, r2.stdout
    assert f"MDLM / AR = {c['mdlm_over_ar']:.2f}x" in r2.stdout
    assert json.loads((out / "comparison.json").read_text()) == c


def test_sample_bodies_leave_out_headers_and_prompts():
    text = (
        "=== sample (prompt 'Return the', blocks) ===\nReturn the value of x\n=== end of sample ===\n"
        "80% of its words occur in the training text\n=== sample (unconditional) ===\nglued fragmentsxx\n"
        "=== end of sample ===\n"
    )
    assert sample_bodies(text) == {"prompt 'Return the', blocks": " value of x", "unconditional": "glued fragmentsxx"}


def test_the_shipped_model_is_the_quickstart_its_provenance_names():
    "nbs/data/quickstart_mdlm (read by the MDLM lessons): the quickstart config's model, trained its steps, unaltered."
    import hashlib, tomllib
    from mdlm_kit.mdlm.sampling import load_inference

    root = Path(__file__).resolve().parents[1]
    shipped = root / "nbs" / "data" / "quickstart_mdlm"
    prov = json.loads((shipped / "provenance.json").read_text())
    assert hashlib.sha256((shipped / "model.safetensors").read_bytes()).hexdigest() == prov["model_safetensors_sha256"]
    quick = tomllib.loads((root / "configs" / "quickstart.toml").read_text())
    model, tok = load_inference(shipped, "cpu")  # refuses a tokenizer other than the model's
    assert prov["trained_steps"] == model.extra_config["trained_steps"] == quick["training"]["max_steps"]
    shape = {k: getattr(model.config, k) for k in ("n_layer", "n_head", "d_model", "max_seq_len")}
    assert shape == {k: quick["model"][k] for k in shape}
    assert (
        prov["command"].startswith("mdlm-kit quickstart")
        and sum(p.numel() for p in model.parameters()) == prov["parameters"]
    )
    steps = [p["step"] for p in json.loads((shipped / "validation.json").read_text())["points"]]
    assert steps[-1] == prov["trained_steps"]
