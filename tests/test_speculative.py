"Speculative decoding: lossless against plain decoding, exact"

"in distribution when sampling, and train/decode consistency."

import pytest
import torch
from torch.overrides import TorchFunctionMode
from mdlm_kit.core.layers import int8_lacks, int8_linear_available
from mdlm_kit.drafts.dflash import DFlashConfig, DFlashDraftModel, DFlashProposer, dflash_forward
from mdlm_kit.drafts.eagle3 import Eagle3Config, Eagle3DraftModel, Eagle3Proposer, Eagle3TreeProposer, eagle3_forward
from mdlm_kit.drafts.verification import (
    LookupBranchProposer,
    NgramStore,
    PromptLookupProposer,
    plain_decode,
    speculative_decode,
    summarize_runs,
)
from mdlm_kit.drafts.verification import SamplingParams
from mdlm_kit.drafts.targets import tiny_target

BS = 6


# the three decoders, each the one loop with its drafter's proposer
def dflash_decode(tgt, d, tables, prompt, n, sp=SamplingParams(), seed=0, eos_token_id=None, num_draft_tokens=None):
    return speculative_decode(tgt, DFlashProposer(d, tables, num_draft_tokens), prompt, n, sp, seed, eos_token_id)


def eagle3_decode(tgt, d, tables, prompt, n, num_draft_tokens=5, sp=SamplingParams(), seed=0, eos_token_id=None):
    return speculative_decode(tgt, Eagle3Proposer(d, tables, num_draft_tokens), prompt, n, sp, seed, eos_token_id)


def eagle3_tree_decode(
    tgt, d, tables, prompt, n, depth=4, top_k=4, tree_nodes=16, sp=SamplingParams(), seed=0, eos_token_id=None
):
    proposer = Eagle3TreeProposer(d, tables, depth, top_k, tree_nodes)
    return speculative_decode(tgt, proposer, prompt, n, sp, seed, eos_token_id)


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    tgt = tiny_target("llama", num_layers=6, hidden_size=64)
    prompt = torch.randint(5, tgt.vocab_size, (9,)).tolist()
    answer = plain_decode(tgt, prompt, 40).tokens  # the target's own greedy continuation (self-distilled)
    return tgt, tgt.embeddings_and_head(), prompt, answer


def _overfit_dflash(tgt, tables, prompt, answer, steps=150):
    torch.manual_seed(0)
    d = DFlashDraftModel(DFlashConfig.from_target(tgt.config, mask_token_id=0, block_size=BS, num_feature_layers=2))
    x = torch.tensor([prompt + answer])
    lm = torch.zeros_like(x)
    lm[0, len(prompt) - 1 :] = 1
    hid = tgt(x, layer_ids=d.config.target_layer_ids).hidden_states
    anchors = torch.arange(len(prompt) - 1, x.shape[1] - 1)[None]
    keep = torch.ones_like(anchors, dtype=torch.bool)
    opt = torch.optim.AdamW(d.parameters(), lr=3e-3)
    for _ in range(steps):
        out = dflash_forward(d, tables, x, lm, hid, anchors, keep, gamma=4.0)
        opt.zero_grad()
        (out["numerator"] / out["denominator"]).backward()
        opt.step()
    return d.eval()


def _overfit_eagle3(tgt, tables, prompt, answer, steps=200):
    torch.manual_seed(0)
    d = Eagle3DraftModel(Eagle3Config.from_target(tgt.config, ttt_length=4))
    x = torch.tensor([prompt + answer])
    lm = torch.zeros_like(x)
    lm[0, len(prompt) - 2 :] = 1
    out = tgt(x, layer_ids=d.config.eagle_aux_hidden_state_layer_ids)
    opt = torch.optim.AdamW(d.parameters(), lr=3e-3)
    for _ in range(steps):
        r = eagle3_forward(d, tables, x, lm, out.hidden_states, out.logits)
        opt.zero_grad()
        (r["numerator"] / r["denominator"]).backward()
        opt.step()
    return d.eval()


@pytest.fixture(scope="module")
def drafters(setup):
    tgt, tables, prompt, answer = setup
    return _overfit_dflash(tgt, tables, prompt, answer), _overfit_eagle3(tgt, tables, prompt, answer)


def test_untrained_drafters_are_lossless_with_tau_near_one(setup):
    tgt, tables, _, _ = setup
    torch.manual_seed(1)
    df = DFlashDraftModel(DFlashConfig.from_target(tgt.config, mask_token_id=0, block_size=BS, num_feature_layers=2))
    e3 = Eagle3DraftModel(Eagle3Config.from_target(tgt.config))
    for seed in range(3):
        p = torch.randint(5, tgt.vocab_size, (5 + seed,), generator=torch.Generator().manual_seed(seed)).tolist()
        ref = plain_decode(tgt, p, 25).tokens
        r1, r2 = dflash_decode(tgt, df, tables, p, 25), eagle3_decode(tgt, e3, tables, p, 25, num_draft_tokens=4)
        r3 = eagle3_tree_decode(tgt, e3, tables, p, 25, depth=3, top_k=3, tree_nodes=8)
        assert r1.tokens == ref and r2.tokens == ref and r3.tokens == ref
        m = summarize_runs([r1, r2])
        assert m["tau_pooled"] < 1.3


def test_prompt_lookup_chain_and_tree_are_lossless_and_accept_repeats(setup):
    """The weightless drafter: on the target's own greedy answer repeated in the prompt it drafts the answer, as a chain
    and as a tree of earlier matches, and the output stays the plain greedy output."""
    tgt, _, prompt, answer = setup
    p = prompt + answer[:20] + prompt  # the answer's start will recur
    ref = plain_decode(tgt, p, 30).tokens
    for proposer in (PromptLookupProposer(k=4), PromptLookupProposer(k=4, ngram=3, branches=3)):
        r = speculative_decode(tgt, proposer, p, 30)
        assert r.tokens == ref
        assert len(r.cycles) < 30 and max(r.cycles) == 5, r.cycles  # some cycles accepted all 4 drafts
    r = speculative_decode(tgt, PromptLookupProposer(k=4, ngram=2, branches=3), prompt[:3], 12)  # no match at first
    assert r.tokens == plain_decode(tgt, prompt[:3], 12).tokens


def test_overfit_drafters_accept_at_decoding_time(setup, drafters):
    "Train/decode consistency: a drafter memorising one answer must be accepted when decoding that prompt."
    tgt, tables, prompt, answer = setup
    df, e3 = drafters
    r1 = dflash_decode(tgt, df, tables, prompt, 40)
    r2 = eagle3_decode(tgt, e3, tables, prompt, 40, num_draft_tokens=4)
    r3 = eagle3_tree_decode(tgt, e3, tables, prompt, 40, depth=4, top_k=3, tree_nodes=10)
    assert r1.tokens == answer and r2.tokens == answer and r3.tokens == answer
    # a tree with one child per node is the chain: the two implementations agree cycle by cycle
    r5 = eagle3_tree_decode(tgt, e3, tables, prompt, 40, depth=4, top_k=1, tree_nodes=4)
    assert (r5.tokens, r5.cycles, r5.accepted) == (r2.tokens, r2.cycles, r2.accepted)
    assert sum(r3.accepted) / len(r3.cycles) >= 2.0, r3.cycles  # and the wider tree still takes most of the path
    tau1 = summarize_runs([r1])["tau_pooled"]
    acc2 = sum(r2.accepted) / sum(r2.proposed)
    assert tau1 >= 0.75 * BS, tau1  # close to the block size
    r4 = dflash_decode(tgt, df, tables, prompt, 40, num_draft_tokens=2)  # verify 2 of the block's BS-1 drafts
    assert (
        r4.tokens == answer
        and max(r4.proposed) == 2
        and max(r4.cycles) == 3
        and sum(r4.accepted) >= 0.8 * sum(r4.proposed)
    )
    assert acc2 >= 0.8, acc2  # nearly every drafted token


@pytest.mark.parametrize("cut", ["eos", "max_new_tokens"])
def test_eos_and_length_cut_inside_an_accepted_block(setup, drafters, cut):
    tgt, tables, prompt, answer = setup
    df, e3 = drafters
    eos, n = (answer[12], 40) if cut == "eos" else (None, 13)
    ref = plain_decode(tgt, prompt, n, eos_token_id=eos).tokens
    assert len(ref) == 13 or ref[-1] == eos
    r1 = dflash_decode(tgt, df, tables, prompt, n, eos_token_id=eos)
    r2 = eagle3_decode(tgt, e3, tables, prompt, n, num_draft_tokens=4, eos_token_id=eos)
    r3 = eagle3_tree_decode(tgt, e3, tables, prompt, n, depth=4, top_k=2, tree_nodes=8, eos_token_id=eos)
    assert r1.tokens == ref and r2.tokens == ref and r3.tokens == ref
    assert max(r1.cycles) > 2  # the cut fell inside a multi-token accepted block


class _CountTrees(LookupBranchProposer):
    "Counts the cycles whose proposal the branch turned into a tree."

    trees = 0

    def propose(self, b, start, budget, sp, g=None):
        p = super().propose(b, start, budget, sp, g)
        self.trees += p.parents is not None
        return p


def _untrained_drafters(tgt):
    "A DFlash and an EAGLE-3 drafter for `tgt`, untrained (seed 1): beside them, what is accepted is a branch's."
    torch.manual_seed(1)
    df = DFlashDraftModel(DFlashConfig.from_target(tgt.config, mask_token_id=0, block_size=BS, num_feature_layers=2))
    return df, Eagle3DraftModel(Eagle3Config.from_target(tgt.config))


def _three_decoders(df, e3, tables):
    "Makers of DFlash's, the EAGLE-3 chain's and the EAGLE-3 tree's proposers, each drafting 3 deep."
    return (
        lambda: DFlashProposer(df, tables, 3),
        lambda: Eagle3Proposer(e3, tables, 3),
        lambda: Eagle3TreeProposer(e3, tables, 3, 2, 6),
    )


def test_lookup_branch_is_lossless_and_adds_what_the_drafter_misses(setup, drafters):
    """Prompt lookup's branch grafted beside DFlash, the EAGLE-3 chain and the tree: on a prompt where the target's
    answer recurs, greedy output equals plain decoding for untrained and overfit drafters, and beside an untrained
    drafter (τ near 1 alone) the branch makes trees and is accepted."""
    tgt, tables, prompt, answer = setup
    p = prompt + answer[:20] + prompt  # the answer's start will recur
    ref = plain_decode(tgt, p, 30).tokens
    for trained, (df, e3) in ((False, _untrained_drafters(tgt)), (True, drafters)):
        for make in _three_decoders(df, e3, tables):
            alone = speculative_decode(tgt, make(), p, 30)
            proposer = _CountTrees(make(), k=4)
            r = speculative_decode(tgt, proposer, p, 30)
            assert alone.tokens == ref and r.tokens == ref, trained
            if not trained:  # the drafter alone accepts almost nothing; beside it the branch passes whole continuations
                assert summarize_runs([alone])["tau_pooled"] < 1.3 and max(r.cycles) == 5, r.cycles
                assert proposer.trees > 0  # and it left the drafts somewhere


def test_lookup_store_drafts_the_stored_answer_and_stays_lossless(setup, drafters):
    """A store holding the target's own answer to the prompt (as the self-distilled chat data holds the target's
    answers): prompt lookup alone and the branch beside DFlash, the EAGLE-3 chain and the tree draft it from the store,
    whole branches are accepted, and every output equals plain decoding, for untrained and overfit drafters."""
    tgt, tables, prompt, answer = setup
    ref = answer[:30]
    store = NgramStore([prompt + answer], max_n=4)
    alone = speculative_decode(tgt, PromptLookupProposer(k=4), prompt, 30)
    fed = speculative_decode(tgt, PromptLookupProposer(k=4, store=store), prompt, 30)
    assert alone.tokens == ref and fed.tokens == ref
    assert summarize_runs([fed])["tau_pooled"] > summarize_runs([alone])["tau_pooled"] + 1, (alone.cycles, fed.cycles)
    # the first cycle: the context has no earlier match, the store drafts the answer's first 4 tokens, all accepted
    assert fed.cycles[0] == 5 and alone.cycles[0] < 5, (alone.cycles, fed.cycles)
    for trained, (df, e3) in ((False, _untrained_drafters(tgt)), (True, drafters)):
        for make in _three_decoders(df, e3, tables):
            r = speculative_decode(tgt, LookupBranchProposer(make(), k=4, store=store), prompt, 30)
            assert r.tokens == ref, trained
            if not trained:  # the untrained drafter accepts almost nothing; the store's branch passes 4 drafts at once
                assert r.cycles[0] == 5, r.cycles


def _wrong_first(draft, token: int):
    "A copy of `draft` that always ranks target token `token` first: its own first choice becomes its runner-up."
    import copy

    d = copy.deepcopy(draft)
    i = int((d.draft_ids() == token).nonzero()[0, 0])
    logits = d.logits

    def ranked(a):
        lg = logits(a).clone()
        lg[..., i] = lg.amax(-1) + 1.0  # first, and the old first one 1 nat behind
        return lg

    d.logits = ranked
    return d


def test_runner_ups_are_lossless_and_accepted_where_the_first_choice_is_wrong(setup, drafters):
    """The EAGLE-3 chain with runner-up leaves: greedy output equals plain decoding, untrained and overfit; a drafter
    whose first choice is always wrong (a token the answer never uses) and whose runner-up is the overfit drafter's
    choice accepts nothing alone, and with the runner-ups about two tokens a cycle (the leaf, then the target's)."""
    tgt, tables, prompt, answer = setup
    _, e3 = drafters
    torch.manual_seed(1)
    e30 = Eagle3DraftModel(Eagle3Config.from_target(tgt.config))
    ref = plain_decode(tgt, prompt, 30).tokens
    for d in (e30, e3):
        for ru in (1e-9, 0.05):
            assert speculative_decode(tgt, Eagle3Proposer(d, tables, 3, runner_up=ru), prompt, 30).tokens == ref
    unused = next(int(t) for t in e3.draft_ids() if int(t) not in answer + prompt)
    wrong = _wrong_first(e3, unused)
    alone = speculative_decode(tgt, Eagle3Proposer(wrong, tables, 3), prompt, 30)
    # (the tiny drafter spreads its probability thin: its runner-up gets about 0.01, so a low bar)
    leaves = speculative_decode(tgt, Eagle3Proposer(wrong, tables, 3, runner_up=1e-3), prompt, 30)
    assert alone.tokens == ref and leaves.tokens == ref
    assert set(alone.cycles) == {1}, alone.cycles  # every first draft rejected
    assert max(leaves.cycles) == 2 and summarize_runs([leaves])["tau_pooled"] > 1.7, leaves.cycles


def test_runner_ups_leave_a_sampled_chain_alone(setup, drafters):
    "At temperature > 0 the chain's drafts carry proposal rows: runner-ups are not added, the draws are unchanged."
    tgt, tables, prompt, _ = setup
    _, e3 = drafters
    sp = SamplingParams(temperature=1.0, top_k=2)
    for s in range(10):
        chain = speculative_decode(tgt, Eagle3Proposer(e3, tables, 2), prompt, 8, sp, seed=s)
        ru = speculative_decode(tgt, Eagle3Proposer(e3, tables, 2, runner_up=1e-9), prompt, 8, sp, seed=s)
        assert (ru.tokens, ru.cycles) == (chain.tokens, chain.cycles)


def _dist(fn, n=400):
    "The empirical distributions of the 2nd and 3rd tokens over n seeds of a decode `fn(seed)`."
    runs = [fn(s).tokens for s in range(n)]
    return [{t: sum(1 for r in runs if r[i] == t) / n for t in {r[i] for r in runs}} for i in (1, 2)]


def _tv(a, b):
    "Total-variation distance between two distributions given as {token: probability}."
    return 0.5 * sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b))


def test_sampling_matches_plain_sampling_in_distribution(setup, drafters):
    """Temperature 1, top-k 2: the marginal distributions of the 2nd and 3rd generated tokens from speculative decoding
    equal plain sampling's (both the accept and the residual-resample paths run: the drafters are overfit on the greedy
    answer). 400 runs each; the total-variation distance between the empirical distributions must stay below 0.12
    (sampling noise alone gives about 0.05 on supports of 2-8 tokens)."""
    tgt, tables, prompt, _ = setup
    df, e3 = drafters
    sp = SamplingParams(temperature=1.0, top_k=2)
    plain = _dist(lambda s: plain_decode(tgt, prompt, 3, sp, seed=10_000 + s))
    for fn in (
        lambda s: dflash_decode(tgt, df, tables, prompt, 3, sp, seed=s),
        lambda s: eagle3_decode(tgt, e3, tables, prompt, 3, 2, sp, seed=s),
        lambda s: eagle3_tree_decode(tgt, e3, tables, prompt, 3, 2, 2, 4, sp, seed=s),
        lambda s: speculative_decode(tgt, PromptLookupProposer(2, ngram=1, branches=2), prompt, 3, sp, seed=s),
    ):
        got = _dist(fn)
        for i in range(2):
            assert _tv(plain[i], got[i]) < 0.12, (i, plain[i], got[i])


def test_lookup_branch_keeps_sampling_exact(setup, drafters):
    """Temperature 1, top-k 2, on a prompt that repeats (so a branch is grafted): DFlash and the tree with the branch
    sample the 2nd and 3rd tokens as plain sampling does (total variation below 0.12 over 400 runs, as above); a
    sampled EAGLE-3 chain, whose drafts carry proposal rows, is verified alone: the same draws as without the branch."""
    tgt, tables, prompt, _ = setup
    df, e3 = drafters
    sp = SamplingParams(temperature=1.0, top_k=2)
    p = prompt + prompt
    plain = _dist(lambda s: plain_decode(tgt, p, 3, sp, seed=10_000 + s))
    trees = []

    def branched(inner, s):
        proposer = _CountTrees(inner, k=2, ngram=1)
        r = speculative_decode(tgt, proposer, p, 3, sp, seed=s)
        trees.append(proposer.trees)
        return r

    for fn in (
        lambda s: branched(DFlashProposer(df, tables, 2), s),
        lambda s: branched(Eagle3TreeProposer(e3, tables, 2, 2, 4), s),
    ):
        got = _dist(fn)
        for i in range(2):
            assert _tv(plain[i], got[i]) < 0.12, (i, plain[i], got[i])
    assert sum(t > 0 for t in trees) > 400  # the branch was grafted in most runs of both
    for s in range(20):
        chain = speculative_decode(tgt, Eagle3Proposer(e3, tables, 2), p, 6, sp, seed=s)
        with_branch = speculative_decode(
            tgt, _CountTrees(Eagle3Proposer(e3, tables, 2), k=2, ngram=1), p, 6, sp, seed=s
        )
        assert (with_branch.tokens, with_branch.cycles) == (chain.tokens, chain.cycles)


def test_speculate_cli_reports_metrics(setup, drafters, tmp_path, capsys, monkeypatch):
    import json
    from mdlm_kit.cli.main import main
    from mdlm_kit.core.layers import (
        Int8Linear,
        OneRowLinear,
        PackedLinear,
        int8_linear_available,
        packed_linear_available,
    )

    # --one-row must decode through OneRowLinear, --packed through PackedLinear's packed weights too, and an int8
    # drafter through Int8Linear's int8 copy; all lossless
    calls = {"one_row": [], "packed": [], "int8": []}
    forward, packed_weight, int8_weight = OneRowLinear.forward, PackedLinear.packed_weight, Int8Linear.int8_weight
    monkeypatch.setattr(OneRowLinear, "forward", lambda self, x: calls["one_row"].append(1) or forward(self, x))
    monkeypatch.setattr(PackedLinear, "packed_weight", lambda self: calls["packed"].append(1) or packed_weight(self))
    monkeypatch.setattr(Int8Linear, "int8_weight", lambda self: calls["int8"].append(1) or int8_weight(self))

    tgt, _, _, _ = setup
    df, e3 = drafters
    tgt.model.save_pretrained(tmp_path / "t")
    tgt.tokenizer.save_pretrained(tmp_path / "t")
    df.save_pretrained(tmp_path / "df")
    e3.save_pretrained(tmp_path / "e3")
    (tmp_path / "p.jsonl").write_text('{"turns": ["What is a list?"]}\nplain line prompt\n')
    chat = [{"role": "user", "content": "What is a list?"}, {"role": "assistant", "content": "A list."}]
    chat = json.dumps({"conversations": chat})
    (tmp_path / "c.jsonl").write_text(chat + "\n")  # a lookup store for the EAGLE-3 run
    e3_flags = ["--one-row", "--lookup-branch", "3", "--runner-up", "0.05"]
    e3_flags += ["--lookup-store", str(tmp_path / "c.jsonl")]
    runs = [("df", []), ("e3", e3_flags), ("df", ["--packed", "--draft-precision", "bf16"])]
    runs += [("e3", ["--packed", "--draft-precision", "int8"])] if int8_linear_available() else []
    for run, (d, flags) in enumerate(runs):
        rc = main(
            [
                "speculate",
                "--target",
                str(tmp_path / "t"),
                "--draft",
                str(tmp_path / d),
                "--prompts",
                str(tmp_path / "p.jsonl"),
                "--max-new-tokens",
                "12",
                "--output",
                str(tmp_path / f"{run}.json"),
                "--no-progress",
            ]
            + flags
        )
        assert rc == 0
        packed = run >= 2 and packed_linear_available()  # --packed: the plain products where this CPU cannot pack
        assert [bool(calls[k]) for k in ("one_row", "packed", "int8")] == [run > 0, packed, run == 3], (run, flags)
        r = json.loads((tmp_path / f"{run}.json").read_text())
        assert r["lossless"] is True and r["n_prompts"] == 2 and "speedup" in r
        assert (r["lookup_branch"], r["runner_up"]) == ((3, 0.05) if run == 1 else (0, 0.0))
        assert (r["lookup_store_tokens"] > 0) == (run == 1)
        assert r["draft_dtype"] == {2: "bfloat16", 3: "int8"}.get(run, "float32")
        assert r["products"] == ["plain", "one-row", "packed", "packed"][run]
        committed = sum(int(k) * v for k, v in r["tokens_per_cycle_histogram"].items())
        # every token but each prompt's first came from a cycle; τ also counts what a prompt's last cycle emitted past
        # the cut (max_new_tokens or EOS): at most 3 drafts and the target's token, or the branch's 3 and the token
        assert 0 <= committed - (r["tokens"] - r["n_prompts"]) <= 4 * r["n_prompts"]
        assert r["tau_pooled"] == pytest.approx(committed / r["cycles"])
    # --auto-products: the products timed on this machine; whichever it picks, the output is the target's
    auto = ["--prompts", str(tmp_path / "p.jsonl"), "--max-new-tokens", "12", "--no-progress", "--auto-products"]
    out = ["--output", str(tmp_path / "auto.json")]
    assert main(["speculate", "--target", str(tmp_path / "t"), "--draft", str(tmp_path / "e3")] + auto + out) == 0
    r = json.loads((tmp_path / "auto.json").read_text())
    assert r["lossless"] is True and r["products"] in ("plain", "one-row", "packed")
    if int8_linear_available():  # --precision int8: the target's linears in int8 rows
        from mdlm_kit.core.layers import Int8RowsLinear

        rows, product = [], Int8RowsLinear.int8_product
        monkeypatch.setattr(Int8RowsLinear, "int8_product", lambda self, x: rows.append(1) or product(self, x))
        i8 = auto[:-1] + ["--precision", "int8", "--output", str(tmp_path / "i8.json")]
        assert main(["speculate", "--target", str(tmp_path / "t"), "--draft", str(tmp_path / "e3")] + i8) == 0
        r = json.loads((tmp_path / "i8.json").read_text())
        assert r["lossless"] is True and rows and r["draft_dtype"] == "float32"
    capsys.readouterr()
    assert main(["speculate", "--target", str(tmp_path / "t"), "--draft", str(tmp_path / "p.jsonl")]) == 2
    assert "drafter (no matching config.json)" in capsys.readouterr().err


def test_packed_linears_are_lossless(setup, drafters):
    """With every linear of the target and both drafters a `PackedLinear` (`--packed`): verification goes through the
    packed weights, and DFlash, the EAGLE-3 chain and the tree give exactly the plain greedy output of the same model
    with its ordinary linears."""
    from mdlm_kit.core.layers import FewRowsLinear, PackedLinear, _packing_lacks, few_rows_linears
    from mdlm_kit.core.layers import packed_linear_available

    if not packed_linear_available():  # the plain path there: test_cpus_without_the_fast_paths_fall_back...
        pytest.skip(f"fp32 weights are not packed here: {_packing_lacks(torch.float32)}")
    tgt, tables, prompt, answer = setup
    df, e3 = drafters
    ref = plain_decode(tgt, prompt, 30).tokens
    few_rows_linears(tgt.model, df, e3, packed=True)
    try:
        assert plain_decode(tgt, prompt, 30).tokens == ref
        for decode in (
            lambda: dflash_decode(tgt, df, tables, prompt, 30, num_draft_tokens=3),
            lambda: eagle3_decode(tgt, e3, tables, prompt, 30, num_draft_tokens=3),
            lambda: eagle3_tree_decode(tgt, e3, tables, prompt, 30, depth=3, top_k=2, tree_nodes=6),
        ):
            assert decode().tokens == ref
        packed = [m for m in tgt.model.modules() if isinstance(m, PackedLinear)]
        assert len(packed) == 6 * 7 + 1 and all(hasattr(m, "_packed") for m in packed)  # each used its packed weight
    finally:
        few_rows_linears(tgt.model, df, e3)
    assert {type(m) for m in tgt.model.modules() if isinstance(m, torch.nn.Linear)} == {FewRowsLinear}


def _smollm2_drafters(tgt):
    "An untrained DFlash (block 8) and EAGLE-3 (TTT 2) drafter for SmolLM2 `tgt`, seed 0."
    torch.manual_seed(0)
    df = DFlashDraftModel(
        DFlashConfig.from_target(tgt.config, mask_token_id=tgt.vocab_size, block_size=8, num_feature_layers=2)
    )
    return df, Eagle3DraftModel(Eagle3Config.from_target(tgt.config, ttt_length=2))


@pytest.mark.slow
def test_lossless_on_smollm2():
    """The real target: speculative greedy output equals plain greedy output for both drafter kinds (untrained is
    enough)."""
    from mdlm_kit.drafts.speculate import load_prompts, speculate
    from mdlm_kit.drafts.targets import TargetModel

    tgt = TargetModel.from_pretrained("smollm2")
    df, e3 = _smollm2_drafters(tgt)
    prompts = load_prompts("embedded", 2)
    for d in (df, e3):
        r = speculate(tgt, d, prompts, max_new_tokens=16, num_draft_tokens=3, progress=False)
        assert r["lossless"] is True and r["tokens"] >= 2
    r = speculate(tgt, e3, prompts, max_new_tokens=16, num_draft_tokens=3, progress=False, tree_nodes=6, tree_top_k=2)
    assert r["lossless"] is True


@pytest.mark.slow
def test_lossless_on_smollm2_in_bf16():
    """The real target in bf16, where bf16 rounding once flipped near-ties between verification and plain decoding:
    with `exact_rows` (switched on by `decoding_target`) DFlash, the EAGLE-3 chain and the tree, drafters in bf16, give
    the plain bf16 greedy output on three held-out prompts, 24 tokens each."""
    from mdlm_kit.core.device import cast_weights, inference_precision
    from mdlm_kit.drafts.speculate import load_prompts, speculate
    from mdlm_kit.drafts.targets import decoding_target

    cpu = torch.device("cpu")
    tgt = decoding_target("smollm2", cpu, inference_precision("bf16", cpu, verifies=True))
    df, e3 = (cast_weights(d, torch.bfloat16) for d in _smollm2_drafters(tgt))
    prompts = load_prompts("heldout", 3)
    for d, nodes in ((df, 0), (e3, 0), (e3, 6)):
        r = speculate(tgt, d, prompts, max_new_tokens=24, num_draft_tokens=4, progress=False, tree_nodes=nodes)
        assert r["lossless"] is True, (type(d).__name__, nodes)
    assert tgt.model.config._attn_implementation == "kit_rows"


@pytest.mark.slow
def test_lossless_on_smollm2_in_int8():
    """The real target decoding in int8 (`--precision int8`: `Int8RowsLinear`, a scale per row, and `row_attention`):
    DFlash, the EAGLE-3 chain and the tree, drafters in fp32, give the int8 target's plain greedy output on three
    held-out prompts, 24 tokens each. (With one scale per call, `Int8Linear`, verification moves the rows.)"""
    from mdlm_kit.core.device import inference_precision
    from mdlm_kit.drafts.speculate import load_prompts, speculate
    from mdlm_kit.drafts.targets import decoding_target

    if not int8_linear_available():
        pytest.skip(f"int8 does not run here: {int8_lacks()}")
    cpu = torch.device("cpu")
    tgt = decoding_target("smollm2", cpu, inference_precision("int8", cpu, 5, verifies=True))
    df, e3 = _smollm2_drafters(tgt)
    prompts = load_prompts("heldout", 3)
    for d, nodes in ((df, 0), (e3, 0), (e3, 6)):
        r = speculate(tgt, d, prompts, max_new_tokens=24, num_draft_tokens=4, progress=False, tree_nodes=nodes)
        assert r["lossless"] is True, (type(d).__name__, nodes)
    assert tgt.model.config._attn_implementation == "kit_rows"


def test_dflash_context_cache_drafts_what_the_full_recompute_drafts(setup, drafters):
    "The decode-time context cache (each committed position fused and projected once) changes no draft."
    from mdlm_kit.drafts.dflash import DFlashContextCache, draft_block

    tgt, tables, prompt, answer = setup
    df, _ = drafters
    ids = torch.tensor([prompt + answer])
    hid = tgt(ids, layer_ids=df.config.target_layer_ids).hidden_states.float()
    cache = DFlashContextCache(df)
    n = 0
    for start in (len(prompt), len(prompt) + 3, len(prompt) + 4, len(prompt) + 9):
        cache.extend(hid[:, n:start])
        n = start
        full = draft_block(df, tables, hid, int(ids[0, start]), start)
        cached = draft_block(df, tables, None, int(ids[0, start]), start, cache=cache)
        assert torch.equal(full, cached), (start, full, cached)
        for k in (
            0,
            1,
            2,
            BS - 1,
            BS + 3,
        ):  # fewer verified slots: the LM head runs on those only, the drafts are the same
            assert torch.equal(draft_block(df, tables, hid, int(ids[0, start]), start, n_draft=k), full[:k]), k
    with pytest.raises(Exception, match="cache holds"):
        draft_block(df, tables, None, 5, start + 1, cache=cache)


def test_eagle3_cache_drafts_what_the_full_recompute_drafts(setup, drafters):
    """The drafter's KV cache, grown cycle by cycle, drafts (chain and tree) exactly what a cache built at once over the
    prefix drafts."""
    from mdlm_kit.drafts.eagle3 import Eagle3ContextCache
    from mdlm_kit.drafts.eagle3 import eagle3_propose, eagle3_tree_propose

    tgt, tables, prompt, answer = setup
    _, e3 = drafters
    ids = torch.tensor([prompt + answer])
    aux = tgt(ids, layer_ids=e3.config.eagle_aux_hidden_state_layer_ids).hidden_states
    grown = Eagle3ContextCache(e3, tables)
    n = hits = 0
    for end in (len(prompt), len(prompt) + 1, len(prompt) + 5, len(prompt) + 6, len(prompt) + 13):
        grown.extend(ids[:, n + 1 : end + 1], aux[:, n:end])  # pairs (features of t, token t+1)
        n = end
        whole = Eagle3ContextCache(e3, tables).extend(ids[:, 1 : end + 1], aux[:, :end])
        chain = eagle3_propose(e3, grown, 4, SamplingParams()).tokens
        assert torch.equal(chain, eagle3_propose(e3, whole, 4, SamplingParams()).tokens), end
        want = answer[end - len(prompt) + 1 : end - len(prompt) + 5]
        hits += sum(a == b for a, b in zip(chain.tolist(), want))  # overfit: it drafts the answer
        assert eagle3_tree_propose(e3, grown, 3, 2, 6) == eagle3_tree_propose(e3, whole, 3, 2, 6)
        torch.testing.assert_close(grown.kv[0], whole.kv[0], rtol=1e-5, atol=1e-5)
    assert hits >= 16, hits  # of 20: the positions line up (a shifted cache drafts the wrong tokens)


def _decoders_equal_plain(target, df, e3, tables, prompt):
    """DFlash, the EAGLE-3 chain and the tree give `target`'s plain greedy output on `prompt` and a prefix of it, and
    drafts are accepted (so verification of several rows ran)."""
    for p in (prompt, prompt[:5]):
        ref = plain_decode(target, p, 40).tokens
        r1 = dflash_decode(target, df, tables, p, 40)
        r2 = eagle3_decode(target, e3, tables, p, 40, num_draft_tokens=4)
        r3 = eagle3_tree_decode(target, e3, tables, p, 40, depth=4, top_k=3, tree_nodes=10)
        assert r1.tokens == ref and r2.tokens == ref and r3.tokens == ref
        if p is prompt:  # the whole prompt's decodes, counted below
            whole = [r1, r2]
    assert all(sum(x.accepted) >= 10 for x in whole), [sum(x.accepted) for x in whole]  # drafts accepted: verified


def test_bf16_target_and_drafters_stay_lossless(setup, drafters):
    """The decoders run with bf16 weights and equal plain bf16 greedy decoding. On a CPU a bf16 target decodes only
    once switched to `exact_rows` (packed linears, attention one row at a time), so each verified row is the bits of a
    one-token step: without it, bf16 rounding of multi-token forwards flipped near-ties on SmolLM2 (bench/README.md).
    Decoding never switches it: an unswitched one is refused with the fix."""
    import copy
    from mdlm_kit.core.config import ConfigError
    from mdlm_kit.core.device import cast_weights
    from mdlm_kit.core.layers import PackedLinear
    from mdlm_kit.drafts.targets import exact_rows

    tgt, _, prompt, _ = setup
    t16 = cast_weights(copy.deepcopy(tgt), torch.bfloat16)
    with pytest.raises(ConfigError, match=r"call exact_rows\(target\) once before decoding"):
        plain_decode(t16, prompt, 2)
    assert t16.model.config._attn_implementation != "kit_rows"  # refused, and left as it was
    exact_rows(t16)
    plain_decode(t16, prompt, 2)
    assert t16.model.config._attn_implementation == "kit_rows"  # on every CPU (packed, or a row at a time)
    assert all(type(m) is PackedLinear for m in t16.model.modules() if isinstance(m, torch.nn.Linear))
    tables16 = t16.embeddings_and_head()
    assert tables16.embed_weight.dtype == torch.bfloat16
    df, e3 = (cast_weights(copy.deepcopy(d), torch.bfloat16) for d in drafters)
    _decoders_equal_plain(t16, df, e3, tables16, prompt)


def test_int8_target_and_drafters_stay_lossless(setup, drafters):
    """An int8 target (`int8_target`: every linear an `Int8RowsLinear`, attention one row at a time): DFlash, the
    EAGLE-3 chain and the tree equal the int8 target's own plain greedy decoding, and drafts are accepted."""
    import copy
    from mdlm_kit.core.layers import Int8RowsLinear
    from mdlm_kit.drafts.targets import int8_target

    if not int8_linear_available():
        pytest.skip(f"int8 does not run here: {int8_lacks()}")
    tgt, tables, prompt, _ = setup
    t8 = int8_target(copy.deepcopy(tgt))
    assert all(type(m) is Int8RowsLinear for m in t8.model.modules() if isinstance(m, torch.nn.Linear))
    _decoders_equal_plain(t8, *drafters, tables, prompt)


def test_bf16_drafters_beside_an_fp32_target_are_lossless(setup, drafters):
    """`--draft-precision bf16`: the drafters in bf16 with packed linears, the fp32 target verifying, through
    `make_proposer` (which hands each drafter the target's tables in its own precision): the output is the fp32
    target's plain greedy output, and the overfit drafters are still accepted."""
    import copy
    from mdlm_kit.core.device import cast_weights
    from mdlm_kit.core.layers import PackedLinear, few_rows_linears
    from mdlm_kit.drafts.speculate import make_proposer

    tgt, tables, prompt, answer = setup
    df, e3 = (few_rows_linears(cast_weights(copy.deepcopy(d), torch.bfloat16), packed=True) for d in drafters)
    assert all(type(m) is PackedLinear for d in (df, e3) for m in d.modules() if isinstance(m, torch.nn.Linear))
    assert df.fc.weight.dtype == torch.bfloat16
    ref = plain_decode(tgt, prompt, 40).tokens
    for d, tree, ru in ((df, 0, 0.0), (e3, 0, 0.0), (e3, 6, 0.0), (e3, 0, 1e-3)):
        r = speculative_decode(
            tgt, make_proposer(d, tables, 3, tree_nodes=tree, tree_top_k=2, runner_up=ru), prompt, 40
        )
        assert r.tokens == ref and sum(r.accepted) >= 20, (tree, ru, sum(r.accepted))
    assert tables.as_dtype(torch.bfloat16).embed_weight.dtype == torch.bfloat16  # the copy the proposers used


@pytest.mark.skipif(not int8_linear_available(), reason=f"int8 does not run here: {int8_lacks()}")
def test_int8_drafters_beside_an_fp32_target_are_lossless(setup, drafters):
    """`--draft-precision int8`: every linear of both drafters but `fc` computes with an int8 copy of its weight (the
    target packed, as `--packed` makes it): the output is the fp32 target's plain greedy output, the overfit drafters
    are still accepted, and the head's logits moved (int8 is not fp32), so the int8 path really ran."""
    import copy
    from mdlm_kit.core.layers import Int8Linear, few_rows_linears
    from mdlm_kit.drafts.speculate import make_proposer, set_draft_precision

    tgt, tables, prompt, answer = setup
    df, e3 = (set_draft_precision(copy.deepcopy(d), "int8", torch.float32) for d in drafters)
    linears = [m for d in (df, e3) for n, m in d.named_modules() if isinstance(m, torch.nn.Linear) and n != "fc"]
    assert linears and all(type(m) is Int8Linear for m in linears)
    assert type(df.fc) is type(e3.fc) is type(drafters[0].fc)  # INT8_KEEP: the features' projection stays fp32
    tgt = copy.deepcopy(tgt)  # the shared target keeps its products
    few_rows_linears(tgt.model, df, e3, packed=True)  # the drafters' int8 linears stay int8
    assert all(type(m) is Int8Linear for m in linears)
    ref = plain_decode(tgt, prompt, 40).tokens
    with torch.no_grad():  # the head's logits: close to fp32's, not equal
        h = torch.randn(3, e3.lm_head.in_features)
        fp32_head = drafters[1].lm_head
        got, want = e3.lm_head(h), fp32_head(h)
        assert 0 < (got - want).abs().max() < 0.05 * want.abs().max()
    for d, tree, ru in ((df, 0, 0.0), (e3, 0, 0.0), (e3, 6, 0.0), (e3, 0, 1e-3)):
        r = speculative_decode(
            tgt, make_proposer(d, tables, 3, tree_nodes=tree, tree_top_k=2, runner_up=ru), prompt, 40
        )
        assert r.tokens == ref and sum(r.accepted) >= 20, (tree, ru, sum(r.accepted))


class _Products(TorchFunctionMode):
    "Record every product on one of `weights`: its form (`linear` or `mm`) and its number of rows."

    def __init__(self, weights):
        super().__init__()
        self.ptrs, self.seen = {w.data_ptr() for w in weights}, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name == "linear" and args[1].data_ptr() in self.ptrs:
            self.seen.append(("linear", args[0].numel() // args[0].shape[-1]))
        elif name == "mm" and args[0].data_ptr() in self.ptrs:
            self.seen.append(("mm", args[1].shape[1]))
        return func(*args, **(kwargs or {}))


def test_fp32_verification_takes_the_few_rows_product_and_stays_lossless(setup, drafters):
    """On a CPU in fp32, every product of the target's weights with 2-8 rows (verifying drafts) is `few_rows_linear`'s
    (W x^T)^T, one row (plain decoding) and prefills stay `F.linear`, and DFlash, the EAGLE-3 chain and the tree still
    give exactly the plain greedy output."""
    tgt, tables, prompt, answer = setup
    df, e3 = drafters
    weights = [m.weight for m in tgt.model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(weights) == 6 * 7 + 1  # seven projections a layer and the LM head
    ref = plain_decode(tgt, prompt, 30).tokens
    for decode in (
        lambda: dflash_decode(tgt, df, tables, prompt, 30, num_draft_tokens=3),
        lambda: eagle3_decode(tgt, e3, tables, prompt, 30, num_draft_tokens=3),
        lambda: eagle3_tree_decode(tgt, e3, tables, prompt, 30, depth=3, top_k=2, tree_nodes=6),
    ):
        with _Products(weights) as seen:
            r = decode()
        assert r.tokens == ref
        forms = set(seen.seen)
        assert {n for f, n in forms if f == "linear"} <= {1, len(prompt)}, forms  # one row, or the prompt
        mm_rows = {n for f, n in forms if f == "mm"}
        assert mm_rows and mm_rows <= {2, 4, 5, 6, 8}, forms  # 3 and 7 rows are padded to 4 and 8


@pytest.mark.parametrize("steps", [25, 60])
def test_walked_tau_is_what_decoding_measures(setup, steps):
    """EAGLE-3's training pass, walked as decoding walks (lesson 18), on the target's own greedy text gives the chain's
    decoded tau: the same cycles and tokens. The mean over chain starts, training's other figure, is not that."""
    tgt, tables, prompt, answer = setup
    e3 = _overfit_eagle3(tgt, tables, prompt, answer, steps=steps)  # partly trained: some drafts missed
    r = eagle3_decode(tgt, e3, tables, prompt, 40, num_draft_tokens=4)
    assert r.tokens == answer
    x = torch.tensor([prompt + answer])
    lm = torch.zeros_like(x)
    lm[0, len(prompt) - 1 : len(prompt) + len(answer) - 2] = 1  # the chain starts that draft answer tokens 2..40
    out = tgt(x, layer_ids=e3.config.eagle_aux_hidden_state_layer_ids)
    with torch.no_grad():
        m = eagle3_forward(e3, tables, x, lm, out.hidden_states, out.logits, ttt_length=4)
    walked = m["walk_tokens"].item() / m["walk_cycles"].item()
    assert 1.2 < walked < 4  # partial acceptance, not all or nothing
    # r.cycles: the tokens each cycle committed (the last one's extra token is cut from the answer afterwards)
    assert (m["walk_tokens"].item(), m["walk_cycles"].item()) == (sum(r.cycles), len(r.cycles))
    assert (m["tau_sum"] / m["n_blocks"]).item() > walked  # the mean over starts counts each easy run many times


@pytest.mark.parametrize("cpu", ["avx2", "arm64"])
def test_cpus_without_the_fast_paths_fall_back_and_stay_lossless(setup, drafters, cpu, capsys):
    """As an AVX2 laptop and as an arm64 machine (the probe's input replaced, `simulated_cpu`): a bf16 target verifies
    with nothing packed, its rows one at a time, and DFlash, the EAGLE-3 chain and the tree equal plain bf16 decoding;
    `--packed` in fp32 packs on the laptop only and stays lossless; an int8 drafter runs in int8 on the laptop and in
    fp32 on arm64 (noted), lossless either way; an int8 target decodes exactly on the laptop (7-bit rows) and is
    refused on arm64."""
    import copy
    from mdlm_kit.core import device
    from mdlm_kit.core.device import DeviceError, cast_weights, inference_precision, simulated_cpu
    from mdlm_kit.core.layers import PackedLinear, few_rows_linears, int8_rows_levels, pack_weight
    from mdlm_kit.drafts.speculate import draft_precision, make_proposer, set_draft_precision
    from mdlm_kit.drafts.targets import exact_rows, int8_target

    import platform

    if cpu == "avx2" and platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("an x86 CPU is simulated on an x86 machine only (its kernels run for real)")
    tgt, tables, prompt, _ = setup
    device._NOTED.clear()
    cpu_ = torch.device("cpu")
    with simulated_cpu(cpu):
        t16 = exact_rows(cast_weights(copy.deepcopy(tgt), torch.bfloat16))
        df, e3 = (cast_weights(copy.deepcopy(d), torch.bfloat16) for d in drafters)
        _decoders_equal_plain(t16, df, e3, t16.embeddings_and_head(), prompt)
        linears = [m for m in t16.model.modules() if isinstance(m, torch.nn.Linear)]
        assert all(type(m) is PackedLinear and not hasattr(m, "_packed") for m in linears)  # exact rows, none packed
        assert t16.model.config._attn_implementation == "kit_rows"
        with pytest.raises(DeviceError, match="AVX-512 BW, VL and DQ, or AVX-NE-CONVERT"):
            pack_weight(linears[0].weight)  # what oneDNN refuses on such a CPU is never asked of it
        t32 = copy.deepcopy(tgt)
        few_rows_linears(t32.model, packed=True)
        assert plain_decode(t32, prompt, 30).tokens == plain_decode(tgt, prompt, 30).tokens
        packed = [hasattr(m, "_packed") for m in t32.model.modules() if type(m) is PackedLinear]
        assert any(packed) == (cpu == "avx2")  # the prompt's rows went through packed weights on the laptop only
        e8 = set_draft_precision(copy.deepcopy(drafters[1]), "int8", torch.float32)
        assert draft_precision(e8) == ("int8" if cpu == "avx2" else "float32")
        ref = plain_decode(tgt, prompt, 40).tokens
        assert speculative_decode(tgt, make_proposer(e8, tables, 3), prompt, 40).tokens == ref
        if cpu == "avx2":
            assert int8_rows_levels() == 63  # AVX2 without VNNI sums pairs in 16 bits: 7-bit rows
            _decoders_equal_plain(int8_target(copy.deepcopy(tgt)), *drafters, tables, prompt)
        else:
            with pytest.raises(DeviceError, match="need an x86 CPU with AVX2; this CPU is aarch64"):
                inference_precision("int8", cpu_, 5, verifies=True)
    err = capsys.readouterr().err
    assert ("--draft-precision int8: fbgemm's int8 products" in err) == (cpu == "arm64")
    assert ("oneDNN's fp32 linears with a packed weight" in err) == (cpu == "arm64")  # --packed in fp32: noted
