"""MDLM training step vs an equal-size causal (AR) step, side by side in one run.

Prints tokens/s of both, their ratio, and the achieved fraction of this machine's fp32 matmul peak
(measured in the same run), at two model sizes. Steps are interleaved (AR, MDLM, AR, ...) so that machine
noise hits both alike; the median is reported.

    python bench/train_step.py [--steps 6] [--threads 2] [--sizes small,medium] [--profile] [--compile]

`--profile` also splits the MDLM step's time by kind of work (torch.profiler, self time): matrix multiplies (with their
own achieved GFLOP/s, to compare with the peak), fused attention, the optimizer, and the element-wise rest.
`--compile` adds a third contender, the MDLM step under `torch.compile` (what `training.compile = true` runs), and
reports its one-off compile time.
"""

import argparse, json, statistics, time
import torch
import torch.nn.functional as F
from mdlm_kit.core.config import ModelConfig
from mdlm_kit.core.device import machine_summary
from mdlm_kit.mdlm.model import DiffusionTransformer
from mdlm_kit.mdlm.diffusion import diffusion_loss, sample_times

SIZES = {  # name: (model config, batch, seq)
    "small": (dict(n_layer=4, n_head=4, d_model=192, max_seq_len=128), 32, 128),  # the quickstart model
    "medium": (dict(n_layer=6, n_head=6, d_model=384, max_seq_len=256), 16, 256),
}
VOCAB, MASK = 2048, 3


def matmul_peak(n=1024, reps=10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def step_flops(cfg: ModelConfig, B: int, T: int, n_logits: float, causal: bool) -> float:
    "Forward+backward FLOPs: 6 x matmul params x tokens, + LM head at n_logits rows, + attention scores."
    d, L, f = cfg.d_model, cfg.n_layer, cfg.ffn_dim
    body = L * (4 * d * d + 3 * d * f)
    attn = L * 2 * 2 * B * T * T * d * (0.5 if causal else 1.0)  # QK^T and AV, fwd; x3 for fwd+bwd below
    return 6 * body * B * T + 6 * d * VOCAB * n_logits + 3 * attn


CATEGORIES = [
    ("matmul", ("aten::mm", "aten::bmm", "aten::addmm")),
    ("attention", ("scaled_dot_product",)),
    ("loss", ("log_softmax", "nll_loss", "cross_entropy")),
    ("optimizer", ("lerp", "addcdiv", "sqrt", "_foreach", "_fused_adam")),
]


def profile_step(step_fn, mm_flops: float, reps: int = 3) -> dict:
    "Share of the step's self CPU time by category, and the matmuls' own GFLOP/s."
    from torch.profiler import profile, ProfilerActivity

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            step_fn()
    total, cat = 0.0, {k: 0.0 for k, _ in CATEGORIES} | {"element-wise and other": 0.0}
    for ev in prof.key_averages():
        t = ev.self_cpu_time_total
        total += t
        name = next((k for k, keys in CATEGORIES if any(s in ev.key for s in keys)), "element-wise and other")
        cat[name] += t
    out = {k: round(v / total, 3) for k, v in cat.items()}
    out["matmul_gflops"] = round(mm_flops * reps / (cat["matmul"] / 1e6) / 1e9, 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--sizes", default="small,medium")
    ap.add_argument("--profile", action="store_true", help="also split the MDLM step's time by kind of work")
    ap.add_argument("--compile", action="store_true", help="also time the MDLM step under torch.compile")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    peak = matmul_peak()
    print(f"fp32 matmul peak (1024^2, best of 10): {peak / 1e9:.1f} GFLOP/s, threads {torch.get_num_threads()}")
    results = {"peak_gflops": peak / 1e9, "machine": machine_summary()}
    for name in args.sizes.split(","):
        mc, B, T = SIZES[name]
        cfg = ModelConfig(vocab_size=VOCAB, mask_token_id=MASK, **mc)
        torch.manual_seed(0)
        kinds = ("ar", "mdlm", "compiled") if args.compile else ("ar", "mdlm")
        models = {k: DiffusionTransformer(cfg) for k in kinds}
        opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-4) for k, m in models.items()}
        fwd = {k: torch.compile(m, dynamic=True) if k == "compiled" else m for k, m in models.items()}
        x = torch.randint(4, VOCAB, (B, T))
        g = torch.Generator().manual_seed(0)
        times, n_logits = {k: [] for k in kinds}, []

        def run(kind):
            m, opt = fwd[kind], opts[kind]
            t0 = time.perf_counter()
            if kind == "ar":
                logits = m(x[:, :-1], causal=True)
                loss = F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
            else:
                out = diffusion_loss(m, x, sample_times(B, generator=g), MASK, generator=g)
                loss = out["loss"]
                if kind == "mdlm":
                    n_logits.append(out["n_masked"])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return time.perf_counter() - t0

        run("ar")
        run("mdlm")
        n_logits.clear()  # warm-up
        if args.compile:
            compile_s = run("compiled") + run("compiled")  # compiles (static, then dynamic shapes)
        for _ in range(args.steps):
            for kind in kinds:
                times[kind].append(run(kind))
        med = {k: statistics.median(v) for k, v in times.items()}
        fl = {
            "ar": step_flops(cfg, B, T - 1, B * (T - 1), True),
            "mdlm": step_flops(cfg, B, T, statistics.mean(n_logits), False),
        }
        row = {"params_m": round(models["mdlm"].num_params() / 1e6, 2), "batch": B, "seq": T}
        for k in ("ar", "mdlm"):
            toks = B * (T - 1 if k == "ar" else T)
            row[f"{k}_tokens_per_s"] = round(toks / med[k], 1)
            row[f"{k}_gflops"] = round(fl[k] / med[k] / 1e9, 1)
            row[f"{k}_peak_fraction"] = round(fl[k] / med[k] / peak, 3)
        row["mdlm_over_ar_tokens_per_s"] = round(row["mdlm_tokens_per_s"] / row["ar_tokens_per_s"], 3)
        if args.compile:
            row["compiled_tokens_per_s"] = round(B * T / med["compiled"], 1)
            row["compiled_over_eager"] = round(med["mdlm"] / med["compiled"], 3)
            row["compile_s"] = round(compile_s, 1)
        if args.profile:
            d, L, f = cfg.d_model, cfg.n_layer, cfg.ffn_dim
            mm = 6 * L * (4 * d * d + 3 * d * f) * B * T + 6 * d * VOCAB * statistics.mean(
                n_logits
            )  # the step's mm/addmm work
            row["profile"] = profile_step(lambda: run("mdlm"), mm)
        results[name] = row
        print(f"\n[{name}] {row['params_m']} M params, batch {B} x {T}")
        print(
            f"  AR   step: {row['ar_tokens_per_s']:>9.0f} tok/s  "
            f"{row['ar_gflops']:>6.1f} GFLOP/s  ({row['ar_peak_fraction']:.0%} of peak)"
        )
        print(
            f"  MDLM step: {row['mdlm_tokens_per_s']:>9.0f} tok/s  "
            f"{row['mdlm_gflops']:>6.1f} GFLOP/s  ({row['mdlm_peak_fraction']:.0%} of peak)"
        )
        print(
            f"  MDLM / AR tokens/s: {row['mdlm_over_ar_tokens_per_s']:.2f} "
            f" (MDLM computes logits only at masked positions, ~half)"
        )
        if args.compile:
            print(
                f"  MDLM step under torch.compile: {row['compiled_tokens_per_s']:>9.0f} "
                f"tok/s, {row['compiled_over_eager']:.2f}x eager "
                f"(after {row['compile_s']:.0f} s of compiling)"
            )
        if args.profile:
            pr = row["profile"]
            print(
                "  MDLM step time: "
                + ", ".join(f"{k} {v:.0%}" for k, v in pr.items() if k != "matmul_gflops")
                + f"; the matmuls alone run at {pr['matmul_gflops']:.1f} GFLOP/s"
                + f" ({pr['matmul_gflops'] * 1e9 / peak:.0%} of peak)"
            )
    print("\n" + json.dumps(results))


if __name__ == "__main__":
    main()
