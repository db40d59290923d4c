"""DFlash training attention at many anchors: the dense boolean mask (SDPA) against the structured backend (context
scores plus per-block scores, no block-to-block part), and flex_attention's block-sparse mask on CUDA; time of a
forward+backward pass and peak memory, side by side in one run.

    python bench/dflash_attention.py [--seq 1024] [--anchors 512] [--block 16] [--heads 4] [--head-dim 64]

Each variant runs in its own subprocess (peak resident memory growth on the CPU; peak allocated memory on CUDA), the
order is interleaved and repeated, and the best of the repeats is reported."""

import argparse, json, resource, subprocess, sys, time


def one(backend: str, S: int, N: int, bs: int, h: int, d: int, device: str) -> dict:
    import torch
    from mdlm_kit.drafts.dflash import BlockStructure, _attend, dflash_attention_mask, dflash_mask_mod, sample_anchors

    torch.manual_seed(0)
    dev = torch.device(device)
    anchors, keep = sample_anchors(torch.ones(1, S, dtype=torch.bool), N, [0])
    anchors, keep = anchors.to(dev), keep.to(dev)
    Q = anchors.shape[1] * bs
    q = torch.randn(1, h, Q, d, device=dev, requires_grad=True)
    k = torch.randn(1, h, S + Q, d, device=dev, requires_grad=True)
    v = torch.randn(1, h, S + Q, d, device=dev, requires_grad=True)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
        mem0 = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    if backend == "structured":
        mask = BlockStructure(anchors, keep, S, bs)
    elif backend == "flex_attention":
        from torch.nn.attention.flex_attention import create_block_mask

        mask = create_block_mask(dflash_mask_mod(anchors, keep, S, bs), 1, None, Q, S + Q, device=dev)
    else:
        mask = dflash_attention_mask(anchors, keep, S, bs)
    y = _attend(q, k, v, mask, backend)
    y.float().square().sum().backward()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    if dev.type == "cuda":
        peak = (torch.cuda.max_memory_allocated() - mem0) / 2**20
    else:
        peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    return {
        "backend": backend,
        "seconds": round(sec, 3),
        "peak_mib": round(peak, 1),
        "queries": Q,
        "keys": S + Q,
        "checksum": round(float(y.detach().float().abs().sum()), 2),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--anchors", type=int, default=512)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.backend:
        print(json.dumps(one(a.backend, a.seq, a.anchors, a.block, a.heads, a.head_dim, a.device)))
        return
    backends = ["sdpa", "structured"] + (["flex_attention"] if a.device.startswith("cuda") else [])
    rows = []
    for _ in range(a.repeats):
        for b in backends:
            r = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--backend",
                    b,
                    "--seq",
                    str(a.seq),
                    "--anchors",
                    str(a.anchors),
                    "--block",
                    str(a.block),
                    "--heads",
                    str(a.heads),
                    "--head-dim",
                    str(a.head_dim),
                    "--device",
                    a.device,
                ],
                capture_output=True,
                text=True,
            )
            if r.returncode:
                print(f"{b}: failed\n{r.stderr[-800:]}")
                continue
            rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    best = {
        b: min((r for r in rows if r["backend"] == b), key=lambda r: r["seconds"])
        for b in backends
        if any(r["backend"] == b for r in rows)
    }
    ref = best["sdpa"]
    sums = {r["checksum"] for r in best.values()}
    print(
        f"{a.device}: seq {a.seq}, {a.anchors} anchors x block "
        f"{a.block} = {ref['queries']} queries over {ref['keys']} keys, "
        f"{a.heads} heads x {a.head_dim}; forward + backward, best of {a.repeats}"
    )
    print(f"{'backend':16} {'seconds':>8} {'peak MiB':>9} {'time vs sdpa':>13} {'memory vs sdpa':>15}")
    for b, r in best.items():
        print(
            f"{b:16} {r['seconds']:8.2f} {r['peak_mib']:9.1f} {r['seconds'] / ref['seconds']:13.2f} "
            f"{r['peak_mib'] / max(ref['peak_mib'], 1e-9):15.2f}"
        )
    print("same outputs" if max(sums) - min(sums) < 1e-3 * max(sums) else f"outputs differ: {sums}")


if __name__ == "__main__":
    main()
