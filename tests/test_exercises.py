"""The course's exercises: each check cell passes the solution the notebook keeps, and fails on wrong answers, so a
check can fail. A lesson's checks are the `check_*` functions of the cell after its "## Exercises" heading; its
solutions are the collapsed cells (`jupyter.source_hidden`)."""

import importlib
import itertools
import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

NBS = Path(__file__).resolve().parents[1] / "nbs"
MASK = -1  # a mask id no test input holds


def _exercises(name: str) -> tuple[dict, dict]:
    "The notebook's check functions and its kept solutions, each defined by running its own cells."
    cells = json.loads((NBS / f"{name}.ipynb").read_text())["cells"]
    code = [("".join(c["source"]), c["metadata"]) for c in cells if c["cell_type"] == "code"]
    base = {"torch": torch, "math": math, "F": F, "MASK": MASK}
    module = re.search(r"#\| default_exp (\S+)", "\n".join(src for src, _ in code))
    if module:  # a lesson's checks may compare with what the lesson defines
        base |= vars(importlib.import_module(f"mdlm_kit.{module.group(1)}"))
    checks, solutions = dict(base), dict(base)
    at = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## Exercises"))
    checks_src = "".join(cells[at + 1]["source"])  # the checks: the cell after the heading
    exec(checks_src, checks)
    for src, meta in code:
        if meta.get("jupyter", {}).get("source_hidden"):
            exec(src, solutions)
    defined = re.findall(r"^def (check_\w+)", checks_src, re.M)  # the cell's own checks, not the module's names
    return {k: checks[k] for k in defined}, solutions


def _rows_alike(x, t):  # masks the same positions in every row: not random
    k = (t * x.shape[1]).round().long()
    masked = torch.arange(x.shape[1])[None] < k[:, None]
    return torch.where(masked, MASK, x), masked


def _coin_flips(x, t):  # the notebook's own `corrupt`: a random number of masks, not exactly t * T
    masked = torch.rand(x.shape) < t[:, None]
    return torch.where(masked, MASK, x), masked


def _two_copy(L, b, leak=False, causal_block=False):  # the lesson's mask with one rule changed
    blk = torch.arange(L) // b
    mask = torch.zeros(2 * L, 2 * L, dtype=torch.bool)
    own = blk[:, None] == blk[None, :]
    mask[:L, :L] = own & (torch.arange(L)[None] <= torch.arange(L)[:, None]) if causal_block else own
    mask[:L, L:] = blk[None, :] <= blk[:, None] if leak else blk[None, :] < blk[:, None]
    mask[L:, L:] = blk[None, :] <= blk[:, None]
    return mask


WRONG = {
    "22a_self_draft": {
        "check_rows_per_forward": [lambda k, b: 1 + k + b, lambda k, b: (k + 1) * b],  # one block; no chain
        "check_tau": [lambda hits: sum(hits), lambda hits: 1 + sum(hits[1:])],  # no stop at the first miss
    },
    "07_diffusion": {
        "check_strata": [lambda u: u, lambda u: (u + torch.arange(len(u))) / (len(u) + 1)],
        "check_count_weight": [
            lambda L, k: math.comb(L, k) * math.factorial(k) * math.factorial(L - k) / math.factorial(L + 1),  # no 1/t
            lambda L, k: 1 / L,
        ],
        "check_bits_per_char": [lambda n, t, c: n * t / c, lambda n, t, c: n / math.log(2)],
    },
    "12_sampling": {
        "check_schedule": [lambda n, s: [n // s] * s, lambda n, s: [n // s + (i >= s - n % s) for i in range(s)]],
        "check_top_k": [
            lambda x, k: x.masked_fill(x < x.topk(k).values[-1], 0.0),
            lambda x, k: x.masked_fill(x > x.topk(k, largest=False).values[-1], -math.inf),
        ],
        "check_blocks": [
            lambda p, n, b: [(i, i + b) for i in range(0, n, b)],  # forgets the prompt
            lambda p, n, b: [(p + i, p + i + b - 1) for i in range(0, n, b)],
        ],
    },
    "13_block_diffusion": {
        "check_two_copy_mask": [
            lambda L, b: _two_copy(L, b, leak=True),  # a noised token sees its own clean block: its answer
            lambda L, b: _two_copy(L, b, causal_block=True),  # left to right inside a block: not diffusion
        ],
        "check_block_nelbo": [
            lambda ce, b: (
                sum(  # no b/m weight: the mean masked count's loss, not the bound
                    sum(ce(frozenset(S)) for S in itertools.combinations(range(b), m)) / math.comb(b, m)
                    for m in range(1, b + 1)
                )
                / b
            ),
            lambda ce, b: ce(frozenset(range(b))),  # every token masked: one level only
        ],
        "check_attended_pairs": [lambda L, b: L * (L + 1), lambda L, b: L * (L + b) // 2],
    },
    "15_speculative": {
        "check_accept": [lambda p, q, d: float(p[d] / q[d]), lambda p, q, d: float(p[d])],
        "check_residual": [lambda p, q: p - q, lambda p, q: (p - q).clamp_min(0)],
        "check_tau": [lambda a, n: (1 - a**n) / (1 - a) if a < 1 else n, lambda a, n: 1 + a * n],
    },
    "17_dflash": {
        "check_decay": [
            lambda B, g: torch.exp(-torch.arange(B, dtype=torch.float64) / g),
            lambda B, g: torch.ones(B, dtype=torch.float64),
        ],
        "check_block_sees": [
            lambda S, a, B: torch.cat([torch.arange(S)[None].expand(B, S) <= a, torch.ones(B, B, dtype=bool)], 1),
            lambda S, a, B: torch.cat([torch.arange(S)[None].expand(B, S) < a, torch.ones(B, B).tril().bool()], 1),
        ],
    },
    "18_eagle3": {
        "check_ttt_mask": [
            lambda S, j: torch.cat([torch.ones(S, S).tril().bool()] * (j + 1), 1),
            lambda S, j: (
                torch.cat([torch.ones(S, S).tril().bool()] + [torch.eye(S).bool()] * (j + 1), 1)[:, : S * (j + 1)]
                if j == 0
                else torch.ones(S, S * (j + 1), dtype=torch.bool)
            ),
        ],
        "check_step_weights": [lambda n, d: [d ** (j + 1) for j in range(n)], lambda n, d: [1.0] * n],
    },
    "09_model": {
        "check_rope_score": [lambda q, k, m, n: float(q @ k), lambda q, k, m, n: float(q @ k) * math.cos(m - n)],
        "check_sees": [lambda T, causal: torch.ones(T, T).tril().bool(), lambda T, causal: torch.ones(T, T).bool()],
    },
    "11_train": {
        "check_epochs": [lambda s, b, n, t: s * b / t, lambda s, b, n, t: s * n / t],
    },
    "22_measure_drafters": {
        "check_speedup": [lambda tau, d, v: tau / v, lambda tau, d, v: (tau - 1) / (d + v)],
        "check_tau_from_cycles": [
            lambda h: sum(int(k) * v for k, v in h.items()) / len(h),  # over the kinds of cycle, not the cycles
            lambda h: sum(int(k) * v for k, v in h.items()) / sum(h.values()) - 1,  # drafts only, not the bonus
        ],
    },
    "01_build_from_scratch": {
        "check_weight": [lambda t: 1 / t, lambda t: (math.pi / 2) * torch.sin(math.pi * t / 2)],
        "check_reveal": [lambda t, s: s / t, lambda t, s: t - s],
        "check_corrupt_exact": [_rows_alike, _coin_flips],
        "check_most_confident": [
            lambda conf, blank, k: conf.topk(k).indices,  # ignores what is written already
            lambda conf, blank, k: conf.masked_fill(~blank, 2.0).topk(k, largest=False).indices,  # the least sure
        ],
    },
}
ANSWER = {"check_weight": "weight", "check_reveal": "reveal_prob"}
ANSWER |= {"check_corrupt_exact": "corrupt_exact", "check_most_confident": "most_confident"}
ANSWER |= {"check_strata": "stratified", "check_count_weight": "count_weight", "check_bits_per_char": "bits_per_char"}
ANSWER |= {"check_schedule": "schedule", "check_top_k": "top_k", "check_blocks": "blocks"}
ANSWER |= {"check_accept": "accept_prob", "check_residual": "residual", "check_tau": "tau"}
ANSWER |= {"check_decay": "decay", "check_block_sees": "block_sees"}
ANSWER |= {"check_ttt_mask": "ttt_mask", "check_step_weights": "step_weights"}
ANSWER |= {"check_rope_score": "rope_score", "check_sees": "sees", "check_epochs": "epochs"}
ANSWER |= {"check_two_copy_mask": "two_copy_mask", "check_block_nelbo": "block_nelbo"}
ANSWER |= {"check_attended_pairs": "attended_pairs"}
ANSWER |= {"check_speedup": "speedup", "check_tau_from_cycles": "tau_from_cycles", "check_rows_per_forward": "rows"}


def test_at_least_twenty_exercises():
    assert sum(len(w) for w in WRONG.values()) >= 20


@pytest.mark.parametrize("name", sorted(WRONG))
def test_each_check_passes_the_solution_and_fails_wrong_answers(name):
    checks, solutions = _exercises(name)
    assert sorted(checks) == sorted(WRONG[name]), "every check has wrong answers here"
    for check, wrong in WRONG[name].items():
        checks[check](solutions[ANSWER[check]])  # the kept solution passes
        for answer in wrong:
            with pytest.raises(AssertionError):
                checks[check](answer)
