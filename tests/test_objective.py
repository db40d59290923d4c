"Exact values of the corruption, the 1/t-weighted loss, stratified times and the deterministic bound."

import math
import pytest
import torch
from mdlm_kit.mdlm.diffusion import corrupt, diffusion_loss, elbo_bound, elbo_terms, eval_times, sample_times

V, MASK = 8, 0


class Fixed(torch.nn.Module):
    "A 'model' whose probability on the true token is p_true, uniform elsewhere."

    def __init__(self, x, p_true):
        super().__init__()
        self.x, self.p = x, p_true

    def forward(self, z, predict_mask):
        tgt = self.x[predict_mask]
        logits = torch.full((len(tgt), V), math.log((1 - self.p) / (V - 1)))
        logits[torch.arange(len(tgt)), tgt] = math.log(self.p)
        return logits


def test_corrupt_masks_exactly_where_rand_below_t():
    g = torch.Generator().manual_seed(3)
    x = torch.arange(1, 7).repeat(3, 1)
    t = torch.tensor([0.0, 0.5, 1.0])
    r = torch.rand(x.shape, generator=torch.Generator().manual_seed(3))
    z, m = corrupt(x, t, MASK, generator=g)
    assert torch.equal(m, r < t[:, None])
    assert torch.equal(z, torch.where(m, torch.zeros_like(x), x))
    assert m[0].sum() == 0 and m[2].all()


def test_loss_hand_computed_weights_and_normaliser():
    # p_true = 1/4 -> CE = ln 4 per masked token. Masked counts 1 (t=0.5) and 2 (t=0.25):
    # sum = 1*ln4/0.5 + 2*ln4/0.25 = 10 ln 4, normalised by ALL 2*4 tokens (not the 3 masked ones).
    x = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 1]])
    masked = torch.tensor([[0, 1, 0, 0], [1, 0, 0, 1]], dtype=torch.bool)
    out = diffusion_loss(Fixed(x, 0.25), x, torch.tensor([0.5, 0.25]), MASK, masked=masked)
    assert out["loss"].item() == pytest.approx(10 * math.log(4) / 8, rel=1e-6)
    assert out["n_masked"] == 3 and out["n_correct"] == 3
    # the accumulation normaliser: the same micro-batch counted against a 4x larger step
    out4 = diffusion_loss(Fixed(x, 0.25), x, torch.tensor([0.5, 0.25]), MASK, masked=masked, n_tokens=32)
    assert out4["loss"].item() == pytest.approx(out["loss"].item() / 4, rel=1e-6)


def test_elbo_terms_weight_is_one_over_t():
    logits = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    terms = elbo_terms(logits, torch.tensor([0, 1]), torch.tensor([0.2, 0.5]))
    assert terms.tolist() == pytest.approx([math.log(2) / 0.2, math.log(10) / 0.5], rel=1e-6)


def test_unmasked_positions_contribute_nothing():
    x = torch.tensor([[1, 2, 3, 4]])
    none = torch.zeros_like(x, dtype=torch.bool)
    assert diffusion_loss(Fixed(x, 0.1), x, torch.tensor([0.5]), MASK, masked=none)["loss"].item() == 0.0


@pytest.mark.parametrize("n", [1, 7, 64])
def test_stratified_times_one_per_stratum(n):
    eps = 1e-3
    t = sample_times(n, eps, antithetic=True, generator=torch.Generator().manual_seed(n))
    assert t.shape == (n,) and t.min() >= eps and t.max() <= 1
    strata = ((t.double() - eps) / (1 - eps) * n).floor().long().clamp(max=n - 1)
    assert sorted(strata.tolist()) == list(range(n))
    assert not torch.equal(strata, torch.arange(n)) or n == 1  # shuffled across micro-batches


def test_unstratified_times_are_iid_uniform():
    t = sample_times(20000, 1e-3, antithetic=False, generator=torch.Generator().manual_seed(0))
    assert t.mean().item() == pytest.approx(0.5, abs=0.01)


def test_weighting_makes_estimate_unbiased_at_every_t():
    x = torch.randint(1, V, (3000, 16))
    for t in (0.05, 0.5, 0.95):
        l = diffusion_loss(Fixed(x, 0.5), x, torch.full((3000,), t), MASK, generator=torch.Generator().manual_seed(1))[
            "loss"
        ]
        assert l.item() == pytest.approx(math.log(2), rel=0.05)


def test_eval_times_are_stratum_midpoints():
    assert eval_times(4, 0.0).tolist() == pytest.approx([0.125, 0.375, 0.625, 0.875])


def test_elbo_bound_deterministic_and_leaves_rng_alone():
    x = torch.randint(1, V, (4, 16))
    torch.manual_seed(5)
    before = torch.get_rng_state()
    r1 = elbo_bound(Fixed(x, 0.5), [x], MASK, n_levels=3)
    assert torch.equal(torch.get_rng_state(), before)
    assert elbo_bound(Fixed(x, 0.5), [x], MASK, n_levels=3) == r1
