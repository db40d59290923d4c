"""Peak memory of one MDLM training step with logits computed only at the masked positions (what the kit does) vs
logits at every position (what a plain masked-LM head does), side by side in one run.

Each variant runs in a fresh subprocess and reports its peak resident memory growth over the model and batch set-up, so
the two numbers are comparable. The saving grows with the vocabulary: the full head holds B x T x V logits and their
gradient; the masked head holds about a fraction E[t] = 1/2 of them.

    python bench/logits_memory.py [--vocab 32768] [--batch 8] [--seq 512]
"""

import argparse, json, resource, subprocess, sys


def one(variant: str, vocab: int, batch: int, seq: int) -> dict:
    import time, torch
    import torch.nn.functional as F
    from mdlm_kit.core.config import ModelConfig
    from mdlm_kit.mdlm.model import DiffusionTransformer
    from mdlm_kit.mdlm.diffusion import corrupt, sample_times

    torch.manual_seed(0)
    m = DiffusionTransformer(
        ModelConfig(vocab_size=vocab, n_layer=2, n_head=4, d_model=256, max_seq_len=seq, mask_token_id=3)
    )
    x = torch.randint(4, vocab, (batch, seq))
    t = sample_times(batch, generator=torch.Generator().manual_seed(0))
    z, masked = corrupt(x, t, 3, torch.Generator().manual_seed(1))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if variant == "masked":
        logits = m(z, predict_mask=masked)  # (n_masked, V)
    else:
        logits = m(z).flatten(0, 1)[masked.flatten()]  # (B*T, V) built, then indexed
    loss = F.cross_entropy(logits.float(), x[masked])
    loss.backward()
    sec = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "variant": variant,
        "peak_growth_mib": round((peak - base) / 1024, 1),
        "step_s": round(sec, 2),
        "n_masked": int(masked.sum()),
        "tokens": batch * seq,
        "loss": round(float(loss), 4),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.variant:
        print(json.dumps(one(a.variant, a.vocab, a.batch, a.seq)))
        return
    rows = []
    for v in ("full", "masked", "full", "masked"):  # interleaved, twice
        r = subprocess.run(
            [
                sys.executable,
                __file__,
                "--variant",
                v,
                "--vocab",
                str(a.vocab),
                "--batch",
                str(a.batch),
                "--seq",
                str(a.seq),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    best = {
        v: min((r for r in rows if r["variant"] == v), key=lambda r: r["peak_growth_mib"]) for v in ("full", "masked")
    }
    f, m = best["full"], best["masked"]
    assert f["loss"] == m["loss"], "both heads must give the same loss"
    print(f"vocab {a.vocab}, batch {a.batch} x {a.seq} tokens, {m['n_masked']} masked")
    print(f"{'logits at':12} {'peak MiB':>9} {'step s':>7}")
    for r in (f, m):
        print(f"{r['variant']:12} {r['peak_growth_mib']:9.1f} {r['step_s']:7.2f}")
    print(
        f"masked / full: memory {m['peak_growth_mib'] / f['peak_growth_mib']:.2f}x, "
        f"time {m['step_s'] / f['step_s']:.2f}x (same loss)"
    )


if __name__ == "__main__":
    main()
