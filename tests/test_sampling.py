"Samplers: the prompt stays, every mask is filled, committed tokens never change, seeds repeat."

import pytest
import torch
from mdlm_kit.core.config import ModelConfig
from mdlm_kit.mdlm.model import DiffusionTransformer
from mdlm_kit.mdlm.sampling import SAMPLERS, diffusion_steps, generate, transfer_schedule

MASK = 3


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return DiffusionTransformer(
        ModelConfig(vocab_size=64, n_layer=1, n_head=2, d_model=32, max_seq_len=48, mask_token_id=MASK)
    )


KW = {"ancestral": {}, "confidence": {}, "blocks": {"block_length": 8}}


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_prompt_fixed_masks_filled_and_monotone(model, sampler):
    prompt = [10, 11, 12, 13]
    states = list(
        diffusion_steps(model, prompt, length=16, steps=8, sampler=sampler, seed=2, batch_size=3, **KW[sampler])
    )
    assert states[0].n_masked == 3 * 16 and states[-1].n_masked == 0
    final = states[-1].tokens
    assert final.shape == (3, 20)
    assert (final[:, :4] == torch.tensor(prompt)).all()
    assert not (final == MASK).any()
    for a, b in zip(states, states[1:]):
        kept = a.tokens != MASK
        assert torch.equal(b.tokens[kept], a.tokens[kept])
        assert torch.equal(b.changed, (a.tokens == MASK) & (b.tokens != MASK))
        assert (b.confidence[b.changed] > 0).all() and (b.confidence[~b.changed] == 0).all()


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_seed_determinism(model, sampler):
    a = generate(model, [5], 16, 8, sampler, seed=7, **KW[sampler])
    b = generate(model, [5], 16, 8, sampler, seed=7, **KW[sampler])
    c = generate(model, [5], 16, 8, sampler, seed=8, **KW[sampler])
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_confidence_reveals_scheduled_count(model):
    states = list(diffusion_steps(model, None, length=10, steps=4, sampler="confidence", seed=0))
    assert [int(s.changed.sum()) for s in states[1:]] == transfer_schedule(10, 4) == [3, 3, 2, 2]


def test_greedy_confidence_picks_most_confident(model):
    x0 = list(diffusion_steps(model, [7, 8], length=6, steps=6, sampler="confidence", temperature=0.0))
    canvas = x0[0].tokens
    with torch.no_grad():
        probs = torch.softmax(model(canvas).double(), -1)[0, 2:]
    best = int(probs.max(-1).values.argmax()) + 2
    assert x0[1].changed[0].nonzero().flatten().tolist() == [best]
    assert x0[1].tokens[0, best] == probs[best - 2].argmax()


def test_blocks_fill_left_to_right(model):
    states = list(diffusion_steps(model, None, length=24, steps=6, sampler="blocks", block_length=8, seed=0))
    first = [min(s.step for s in states if s.changed[0, j]) for j in range(24)]
    assert max(first[:8]) < min(first[8:16]) and max(first[8:16]) < min(first[16:])


def test_bad_arguments(model):
    with pytest.raises(ValueError, match="exceeds the model's context"):
        generate(model, [1] * 40, 16, 4)
    with pytest.raises(ValueError, match="multiple of block_length"):
        generate(model, None, 10, 5, "blocks", block_length=4)
    with pytest.raises(ValueError, match="unknown sampler"):
        generate(model, None, 4, 4, "beam")
