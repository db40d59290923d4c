"""`bench/speculate.py` on a tiny target with the weightless prompt-lookup drafter: plain decoding and the drafter are
measured side by side, the prefill is timed apart from the decode loop, and the cycle costs use the step past it."""

import json, sys
import pytest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import speculate


def _bench(tmp_path, monkeypatch, repeats: int, precision: str = "fp32", more=()) -> dict:
    "The bench on a tiny target with prompt lookup, 2 prompts of 40 tokens: its results in `precision`."
    from mdlm_kit.drafts.targets import tiny_target

    tgt = tiny_target("llama", num_layers=2)
    tgt.model.save_pretrained(tmp_path / "target")
    tgt.tokenizer.save_pretrained(tmp_path / "target")
    out = tmp_path / "spec.json"
    argv = ["speculate.py", "--target", str(tmp_path / "target"), "--dflash", "", "--eagle3", ""]
    argv += ["--prompt-lookup", "3", "--precision", precision, "--num-prompts", "2", "--max-new-tokens", "40"]
    argv += ["--repeats", str(repeats), "--output", str(out), *more]
    monkeypatch.setattr(sys, "argv", argv)
    speculate.main()
    return json.loads(out.read_text())[precision]


def test_prefill_apart_and_lossless(tmp_path, monkeypatch):
    r = _bench(tmp_path, monkeypatch, repeats=1)
    m = r["prompt-lookup"]
    assert r["n_prompts"] == 2 and m["lossless_prompts"] == "2/2" and r["hf_generate"]["same_tokens"] == "2/2"
    assert r["plain_prefill_s"] > 0 and r["plain_step_ms"] > 0 and r["hf_generate"]["plain_over_generate"] > 0
    # the drafter's time splits into prefill, drafting, verification and the loop's bookkeeping, none negative
    assert m["prefill_time_s"] > 0 and m["draft_time_s"] >= 0 and m["verify_time_s"] > 0 and m["other_time_s"] >= 0
    assert m["decode_speedup_median"] > 0 and m["speedup_median"] > 0
    # the cycle costs are in steps past the prompt: verification time per cycle over that step
    step = r["plain_step_ms_by_round"][0] / 1e3  # (plain_step_ms has 2 decimals: too few for a tiny target's step)
    per_cycle = m["verify_time_s"] / m["cycles"] / step
    # the JSON rounds: verify_time_s to 3 decimals (0.0005 s), the cost to 2 (0.005 steps); a wrong step is far outside
    slack = 0.005 + per_cycle * 0.0005 / m["verify_time_s"] + 1e-3
    assert abs(m["verify_steps_per_cycle"] - per_cycle) < slack


def test_cycle_costs_per_round_against_that_rounds_step(tmp_path, monkeypatch):
    "With two rounds each round's cycle cost is divided by its own plain step; the reported cost is their median."
    r = _bench(tmp_path, monkeypatch, repeats=2)
    m = r["prompt-lookup"]
    assert len(r["plain_step_ms_by_round"]) == 2 and len(m["verify_steps_by_round"]) == 2
    assert abs(m["verify_steps_per_cycle"] - sum(m["verify_steps_by_round"]) / 2) < 0.006  # the median of two


def test_bf16_against_plain_bf16_and_plain_fp32(tmp_path, monkeypatch):
    """`--precision bf16 --plain-fp32`: lossless against plain bf16 decoding (the target decodes with `exact_rows`), and
    the fp32 target's plain decoding timed in the same rounds, each method's speedup read against it too."""
    r = _bench(tmp_path, monkeypatch, repeats=1, precision="bf16", more=["--plain-fp32", "--packed"])
    m = r["prompt-lookup"]
    assert r["precision"] == "bf16" and m["lossless_prompts"] == "2/2" and r["hf_generate"]["same_tokens"] == "2/2"
    assert r["plain_fp32_tokens_per_s"] > 0
    # one round: the speedup over plain fp32 is the speedup over plain bf16 times plain bf16's over plain fp32's
    want = m["speedup_median"] * r["plain_over_plain_fp32"]
    assert abs(m["speedup_vs_plain_fp32_median"] - want) < 0.002 * (1 + want), (m, r["plain_over_plain_fp32"])
    fp32 = _bench(tmp_path, monkeypatch, repeats=1)  # fp32 itself: no second target, no second speedup
    assert "plain_fp32_tokens_per_s" not in fp32 and "speedup_vs_plain_fp32_median" not in fp32["prompt-lookup"]


def test_int8_against_plain_int8_and_plain_fp32(tmp_path, monkeypatch):
    """`--precision int8 --plain-fp32`: the target decodes with int8 linears, a scale per row (`decoding_target`), and
    the drafter's output equals plain int8 decoding and transformers' `generate` of the same int8 target."""
    from mdlm_kit.core.layers import int8_lacks, int8_linear_available

    if not int8_linear_available():
        pytest.skip(f"int8 does not run here: {int8_lacks()}")
    r = _bench(tmp_path, monkeypatch, repeats=1, precision="int8", more=["--plain-fp32", "--packed"])
    m = r["prompt-lookup"]
    assert r["precision"] == "int8" and m["lossless_prompts"] == "2/2" and r["hf_generate"]["same_tokens"] == "2/2"
    assert r["plain_fp32_tokens_per_s"] > 0 and m["speedup_vs_plain_fp32_median"] > 0


def test_cycle_costs_by_hand():
    "Each round's phase time per cycle over that round's own step, not a step shared by the rounds."
    from mdlm_kit.drafts.verification import DecodeResult

    def res(verify, cycles):
        return DecodeResult(tokens=[0] * cycles, cycles=[1] * cycles, verify_time=verify, draft_time=verify / 10)

    rounds = [{"m": [res(1.0, 1), res(0.0, 1)]}, {"m": [res(3.0, 2)]}]  # 2 cycles a round, 1.0 s and 3.0 s
    assert speculate.cycle_costs(rounds, [0.1, 0.5], "m", "verify") == pytest.approx(
        [5.0, 3.0]
    )  # 0.5 s / 0.1, 1.5 s / 0.5
    assert speculate.cycle_costs(rounds, [0.1, 0.5], "m", "draft") == pytest.approx(
        [0.5, 0.3]
    )  # (with the shared 0.3 s: 1.67, 5.0)


def _method_args(tmp_path, **kw):
    "The bench's arguments for a DFlash and an EAGLE-3 drafter (empty configs: `_methods` only lists them)."
    import argparse

    for name in ("df", "e3"):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "config.json").write_text("{}")
    base = dict(dflash=str(tmp_path / "df"), dpace="", eagle3=str(tmp_path / "e3"), selfdraft="", num_draft_tokens=6)
    base.update(dflash_draft_tokens=4, min_confidence="0.3", chain_lengths="", tree_nodes=0, tree_depth=None)
    base.update(lookup_branch="", runner_up="", prompt_lookup=0, only="", draft_precision="same", lookup_store="")
    return argparse.Namespace(**{**base, **kw})


def test_lookup_branch_runs_each_setting_again(tmp_path):
    "`--lookup-branch 2,4`: every drafter setting once alone and once per branch length, NAME+plN, with its length."
    got = {m[0]: (m[3], m[4], m[6]) for m in speculate._methods(_method_args(tmp_path, lookup_branch="2,4"))}
    assert got == {
        "dflash": (4, 0.0, 0),
        "dflash-conf0.3": (4, 0.3, 0),
        "dflash+pl2": (4, 0.0, 2),
        "dflash-conf0.3+pl2": (4, 0.3, 2),
        "dflash+pl4": (4, 0.0, 4),
        "dflash-conf0.3+pl4": (4, 0.3, 4),
        "eagle3": (6, 0.0, 0),
        "eagle3-conf0.3": (6, 0.3, 0),
        "eagle3+pl2": (6, 0.0, 2),
        "eagle3-conf0.3+pl2": (6, 0.3, 2),
        "eagle3+pl4": (6, 0.0, 4),
        "eagle3-conf0.3+pl4": (6, 0.3, 4),
    }


def test_runner_up_runs_each_eagle3_chain_setting_again(tmp_path):
    "`--runner-up 0.1`: each EAGLE-3 chain setting again as NAME+ruP (DFlash and the tree never), with the branch too."
    args = _method_args(tmp_path, runner_up="0.1", lookup_branch="4", tree_nodes=8)
    got = {m[0]: (m[2], m[4], m[5], m[6]) for m in speculate._methods(args)}
    assert got == {
        "dflash": (0, 0.0, 0.0, 0),
        "dflash-conf0.3": (0, 0.3, 0.0, 0),
        "dflash+pl4": (0, 0.0, 0.0, 4),
        "dflash-conf0.3+pl4": (0, 0.3, 0.0, 4),
        "eagle3": (0, 0.0, 0.0, 0),
        "eagle3-conf0.3": (0, 0.3, 0.0, 0),
        "eagle3+ru0.1": (0, 0.0, 0.1, 0),
        "eagle3-conf0.3+ru0.1": (0, 0.3, 0.1, 0),
        "eagle3-tree": (8, 0.0, 0.0, 0),
        "eagle3+pl4": (0, 0.0, 0.0, 4),
        "eagle3-conf0.3+pl4": (0, 0.3, 0.0, 4),
        "eagle3+ru0.1+pl4": (0, 0.0, 0.1, 4),
        "eagle3-conf0.3+ru0.1+pl4": (0, 0.3, 0.1, 4),
        "eagle3-tree+pl4": (8, 0.0, 0.0, 4),
    }


def test_only_keeps_the_named_methods(tmp_path):
    "`--only`: the named methods of those the flags make, in their order; a name the flags do not make is refused."
    args = _method_args(tmp_path, lookup_branch="4", only="eagle3-conf0.3+pl4,dflash")
    assert [m[0] for m in speculate._methods(args)] == ["dflash", "eagle3-conf0.3+pl4"]
    with pytest.raises(SystemExit, match="no method called eagle3\\+pl9"):
        speculate._methods(_method_args(tmp_path, lookup_branch="4", only="eagle3+pl9"))


def test_draft_precision_runs_each_drafter_method_again(tmp_path):
    "`--draft-precision same,bf16`: each drafter method as it is and again as NAME@bf16; prompt lookup once."
    args = _method_args(tmp_path, dflash="", min_confidence="", lookup_branch="4", prompt_lookup=3)
    args.draft_precision = "same,bf16"
    got = {m[0]: (m[6], m[7]) for m in speculate._methods(args)}
    assert got == {
        "eagle3": (0, "same"),
        "eagle3+pl4": (4, "same"),
        "eagle3@bf16": (0, "bf16"),
        "eagle3+pl4@bf16": (4, "bf16"),
        "prompt-lookup": (0, "same"),
    }


def test_lookup_store_runs_each_branch_and_prompt_lookup_again(tmp_path):
    """`--lookup-store FILE`: each lookup branch again as NAME+plsN, and prompt lookup again as prompt-lookup+store,
    those with the store and the rest without."""
    args = _method_args(tmp_path, dflash="", lookup_branch="4", prompt_lookup=3, lookup_store="chat.jsonl")
    got = {m.name: (m.lookup_branch, m.store) for m in speculate._methods(args)}
    assert got == {
        "eagle3": (0, False),
        "eagle3-conf0.3": (0, False),
        "eagle3+pl4": (4, False),
        "eagle3-conf0.3+pl4": (4, False),
        "eagle3+pls4": (4, True),
        "eagle3-conf0.3+pls4": (4, True),
        "prompt-lookup": (0, False),
        "prompt-lookup+store": (0, True),
    }
