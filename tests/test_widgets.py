"Widgets, headless (matplotlib Agg): what each figure draws is what the trainers' own functions return."

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
import torch
from mdlm_kit.drafts.dflash import dflash_attention_mask, dflash_position_weights, sample_anchors
from mdlm_kit.drafts.eagle3 import ttt_attention_mask
from mdlm_kit.ui import widgets as W


def _bars(fig):
    return [p.get_height() for p in fig.axes[0].patches]


def test_anchor_mask_figure_draws_the_trainer_mask():
    fig, d = W.anchor_mask_figure(seq_len=30, block_size=5, num_anchors=4, seed=7, preset="chat")
    lm = W.loss_mask_preset("chat", 30)
    anchors, keep = sample_anchors(lm[None], 4, [7])
    ref = dflash_attention_mask(anchors, keep, 30, 5)[0]
    assert torch.equal(d["mask"], ref) and d["anchors"].tolist() == anchors[0].tolist()
    drawn = fig.axes[1].images[0].get_array()
    assert drawn.shape == (20, 50) and (torch.tensor(drawn.data) == ref.float()).all()
    # every anchor is a supervised pair; no block sees another block or the context at/after its anchor
    for i, a in enumerate(anchors[0].tolist()):
        assert lm[a] and lm[a + 1]
        rows = ref[i * 5 : (i + 1) * 5]
        assert not rows[:, a:30].any() and rows[:, :a].all()
        assert rows[:, 30 + i * 5 : 30 + (i + 1) * 5].all() and rows[:, 30:].sum() == 25
    plt.close(fig)


def test_ttt_mask_and_weight_figures():
    fig, masks = W.ttt_mask_figure(5, 4)
    assert all(torch.equal(m, ttt_attention_mask(5, j)) for j, m in enumerate(masks))
    assert masks[3].shape == (5, 20) and masks[3].sum() == 15 + 3 * 5
    (ax,) = fig.axes  # one panel: the drawn image is the last step's mask
    assert (ax.images[0].get_array() == masks[3].float().numpy()).all() and len(ax.get_xticks()) == 4
    plt.close(fig)
    for S, T in ((16, 7), (2, 1)):  # the slider extremes: a readable size, one tick per key block
        fig, _ = W.ttt_mask_figure(S, T)
        w, h = fig.get_size_inches()
        assert 2 <= w <= 11 and 1.5 <= h <= 4.5 and len(fig.axes[0].get_xticks()) == T
        plt.close(fig)
    fig, w = W.ttt_weights_figure(3, 0.5)
    assert _bars(fig) == pytest.approx([1, 0.5, 0.25]) and "0.5^j" in fig.axes[0].get_title()
    plt.close(fig)


def test_decay_and_dpace_bars_are_the_loss_weights():
    fig, w = W.decay_weights_figure(6, 2.0)
    valid = torch.ones(1, 6, dtype=torch.bool)
    valid[:, 0] = False
    ref = dflash_position_weights(valid, "dflash", 2.0)[0][0, 1:].tolist()
    assert _bars(fig) == pytest.approx(ref) and ref[0] == 1.0 and ref[1] == pytest.approx(0.6065306597)
    plt.close(fig)
    fig, w = W.dpace_weights_figure("0.5, 0.5", alpha=0.0)
    assert w["dpace"] == pytest.approx([0.75, 0.25])
    assert _bars(fig) == pytest.approx([0.75, 0.25, 0.5, 0.25, 1.5, 1.0])  # D-PACE, then the two ablations
    plt.close(fig)
    with pytest.raises(ValueError, match="lie in \\[0, 1\\]"):
        W.dpace_weights([1.5])


def test_elbo_weight_and_explorers_rerun_on_change():
    fig, (t, w) = W.elbo_weight_figure(0.1)
    assert w[0] == pytest.approx(10.0) and w[-1] == pytest.approx(1.0)
    plt.close(fig)
    ex = W.decay_explorer(block_size=4, gamma=1.0)
    assert ex.result == pytest.approx([1.0, 0.36787944, 0.13533528])
    ex.children[1].value = ex.children[1].options[-1]  # gamma 20
    assert ex.result[2] == pytest.approx(0.9048374, abs=1e-6)
    ex = W.anchor_mask_explorer(seq_len=20, num_anchors=2)
    ex.children[4].value = "last-turn"
    assert all(a >= 13 for a in ex.result["anchors"].tolist())
    plt.close("all")


def test_float_sliders_hold_their_defaults_exactly_and_redraws_take_turns():
    "The browser snaps a FloatSlider's default in float arithmetic and sends it back; these sliders have exact values."
    import threading

    ex = W.ttt_weights_explorer(length=7, decay=0.8)
    assert ex.children[1].value == 0.8 and 0.8 in ex.children[1].options
    assert W.elbo_weight_explorer(t_min=0.02).children[0].value == 0.02
    with pytest.raises(ValueError, match="not one of the slider's values"):
        W.ttt_weights_explorer(decay=0.83)
    with pytest.raises(W.WidgetError, match=r"TTT length = 13 is outside the slider's range \(1 to 12\)"):
        W.ttt_weights_explorer(length=13)  # an IntSlider would have shown 12 under a default of 13
    # redraws from two threads at once: each completes whole, the last one wins
    ts = [threading.Thread(target=lambda v=v: setattr(ex.children[1], "value", v)) for v in (0.5, 0.9)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert ex.result == pytest.approx(W.ttt_step_weights(7, ex.children[1].value))
    plt.close("all")


def _drawn_tick_labels(axis, lim):
    "The tick labels matplotlib draws: those of ticks inside the view limits."
    lo, hi = sorted(lim)
    return [
        t.label1
        for t in axis.get_major_ticks()
        if lo - 1e-9 <= t.get_loc() <= hi + 1e-9 and t.label1.get_visible() and t.label1.get_text()
    ]


def _unreadable(fig) -> list[str]:
    """What a learner could not read: text cut off at the figure's edge, tick labels that overlap, a figure too big to
    see."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # what the explorer's savefig draws with
    canvas.draw()
    r = canvas.get_renderer()
    W_px, H_px = canvas.get_width_height()
    w, h = fig.get_size_inches()
    problems = [] if 4 <= w <= 11.5 and 1.5 <= h <= 9 else [f"size {w:.1f} x {h:.1f} in"]
    for ax in fig.axes:
        b = ax.get_tightbbox(r)  # the axes with everything drawn around it: labels, ticks, title, legend
        if b.x0 < -1 or b.y0 < -1 or b.x1 > W_px + 1 or b.y1 > H_px + 1:
            problems.append(f"{ax.get_title()!r} panel reaches past the figure: {b.bounds} in {W_px} x {H_px}")
        for labels in (_drawn_tick_labels(ax.xaxis, ax.get_xlim()), _drawn_tick_labels(ax.yaxis, ax.get_ylim())):
            boxes = [l.get_window_extent(r) for l in labels]
            problems += [
                f"tick labels {labels[i].get_text()!r} and {labels[i + 1].get_text()!r} overlap"
                for i in range(len(boxes) - 1)
                if boxes[i].overlaps(boxes[i + 1])
            ]
    return problems


CORNERS = {  # each figure at the extremes its explorer's sliders allow
    W.anchor_mask_figure: [
        dict(seq_len=s, block_size=b, num_anchors=a) for s in (8, 128) for b in (2, 16) for a in (1, 16)
    ],
    W.ttt_mask_figure: [dict(seq_len=s, ttt_steps=t) for s in (2, 16) for t in (1, 7)],
    W.decay_weights_figure: [dict(block_size=b, gamma=g) for b in (2, 32) for g in (0.5, 20.0)],
    W.dpace_weights_figure: [
        dict(confidences=c, alpha=a) for c in ("0.5", ", ".join(["0.9"] * 16)) for a in (0.0, 1.0)
    ],
    W.ttt_weights_figure: [dict(length=n, decay=d) for n in (1, 12) for d in (0.1, 1.0)],
    W.elbo_weight_figure: [dict(t_min=t) for t in (0.001, 0.5)],
}


@pytest.mark.parametrize("figure", list(CORNERS), ids=lambda f: f.__name__)
def test_every_figure_stays_readable_at_its_sliders_extremes_and_leaves_pyplot_alone(figure):
    plt.close("all")
    for kw in CORNERS[figure]:
        fig, _ = figure(**kw)
        assert not (bad := _unreadable(fig)), (kw, bad)
    assert plt.get_fignums() == []  # plain Figures: the inline backend's close-all at a cell's end cannot touch them
