"""Why verifying a few tokens cost 1.6-1.9 decode steps on this CPU, and what `few_rows_linear` changes.

    python bench/few_rows_matmul.py            # SmolLM2-135M-Instruct, fp32, 2-8 rows

Two measurements, one process, after a warm-up, interleaved over rounds, medians:
- kernels: one pass over all of the target's weight matrices (every decoder layer's seven projections and the LM
  head), each multiplied by n rows, as `F.linear` (x W^T), as `few_rows_linear` ((W x^T)^T) and, where torch has
  oneDNN, `packed`: oneDNN's product with the weight laid out once for a few rows (what `PackedLinear` computes from
  3 rows up);
- forwards: a 45-token chat prompt is prefilled into a `CachedTarget`, then `extend` runs n tokens and `crop`s back,
  with the target's linears as `FewRowsLinear`, as `PackedLinear` (one row as two, 3-128 rows packed: `--packed`)
  and switched back to `nn.Linear` (same weights, same model).
n = 1 is a plain decode step; n = k+1 verifies k drafts. Ratios to n = 1 are what verification costs in plain steps.
`--wide-sizes` times the kernels alone as `F.linear` and as a bare (W x^T)^T: for 3 and 7 rows without the zero row
`few_rows_linear` adds, and past `FEW_ROWS_MAX` (a batch of decode steps, as self-distillation generates), to show how
far the other form stays cheaper on this machine.
Every form gives the same logits up to fp32 rounding (the largest difference from `F.linear` is printed)."""

import json, statistics, sys, time
from pathlib import Path
import torch
import torch.nn.functional as F
from mdlm_kit.core.layers import few_rows_linear, few_rows_linears, pack_weight, packed_linear, packed_linear_available
from mdlm_kit.core.device import machine_summary
from mdlm_kit.drafts.verification import CachedTarget
from mdlm_kit.drafts.targets import TargetModel
from decode_precision import prompt_ids  # the same probe prompt (bench/ is on the path when run as a script)
from bench_flags import bench_parser

KINDS = {"F.linear": F.linear, "few_rows_linear": few_rows_linear}
SWITCH = {"F.linear": dict(enable=False), "few_rows_linear": {}, "packed": dict(packed=True)}  # few_rows_linears


def _packed_kernel(weights):
    "oneDNN's product with each weight packed once for a few rows, as `PackedLinear` keeps it."
    packed = {w.data_ptr(): pack_weight(w) for w in weights}
    return lambda x, w: packed_linear(x, packed[w.data_ptr()])


WIDE = {"F.linear": F.linear, "(W x^T)^T": lambda x, w: torch.mm(w, x.t()).t()}


def _kernels_ms(weights, rows, fn):
    xs = {k: torch.randn(rows, k) for k in {w.shape[1] for w in weights}}
    t0 = time.perf_counter()
    for w in weights:
        fn(xs[w.shape[1]], w)
    return (time.perf_counter() - t0) * 1e3


def _extend_ms(ct, start, n):
    t0 = time.perf_counter()
    ct.extend(torch.full((1, n), 42))
    dt = time.perf_counter() - t0
    ct.crop(start)
    return dt * 1e3


@torch.no_grad()
def _logit_gap(tgt, ids, n):
    "Largest |logit| difference of an n-token extend between the two forms."
    out = {}
    for kind in KINDS:
        few_rows_linears(tgt.model, **SWITCH[kind])
        ct = CachedTarget(tgt)
        ct.extend(ids)
        out[kind] = ct.extend(torch.arange(40, 40 + n)[None])[0]  # logits (n, V)
    few_rows_linears(tgt.model)
    return {k: (out[k] - out["F.linear"]).abs().max().item() for k in KINDS if k != "F.linear"}


def main():
    ap = bench_parser(__doc__, "few_rows_matmul.json")
    ap.add_argument("--sizes", default="1,2,3,4,5,6,8")
    ap.add_argument("--wide-sizes", default="3,7,16,32,48,64")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    tgt = TargetModel.from_pretrained(args.target)
    weights = [m.weight for m in tgt.model.modules() if isinstance(m, torch.nn.Linear)]
    if packed_linear_available():
        KINDS["packed"] = _packed_kernel(weights)
    ids = torch.tensor([prompt_ids(tgt.tokenizer)])
    sizes = [int(s) for s in args.sizes.split(",")]
    wide = [int(s) for s in args.wide_sizes.split(",") if s]
    ct = CachedTarget(tgt)
    ct.extend(ids)
    start = ct.length
    times = {(part, kind, n): [] for part in ("kernels", "forward") for kind in KINDS for n in sizes}
    times |= {("wide", kind, n): [] for kind in WIDE for n in [1] + wide}
    for r in range(args.rounds + 1):  # round 0 is the warm-up
        for kind in KINDS if r % 2 else list(KINDS)[::-1]:
            few_rows_linears(tgt.model, **SWITCH[kind])
            _extend_ms(ct, start, 3)  # untimed: PackedLinear packs its weights on first use after a switch
            for n in sizes:
                k = _kernels_ms(weights, n, KINDS[kind])
                f = _extend_ms(ct, start, n)
                if r:
                    times[("kernels", kind, n)].append(k)
                    times[("forward", kind, n)].append(f)
        for kind in WIDE if r % 2 else list(WIDE)[::-1]:
            for n in [1] + wide if wide else []:
                k = _kernels_ms(weights, n, WIDE[kind])
                if r:
                    times[("wide", kind, n)].append(k)
    few_rows_linears(tgt.model)
    out = {
        "command": "python " + " ".join(sys.argv),
        "machine": machine_summary(),
        "prompt_tokens": ids.shape[1],
        "threads": torch.get_num_threads(),
        "rounds": args.rounds,
        "matrices": len(weights),
        "weight_mb": round(sum(w.numel() for w in weights) * 4 / 2**20),
    }
    print(
        f"{len(weights)} matrices ({out['weight_mb']} MiB fp32), prompt {ids.shape[1]} tokens, "
        f"{torch.get_num_threads()} threads, medians of {args.rounds} interleaved rounds"
    )
    print(f"{'':9} {'form':16} " + " ".join(f"{'n=' + str(n):>12}" for n in sizes))
    for part in ("kernels", "forward"):
        out[part] = {}
        for kind in KINDS:
            med = {n: statistics.median(times[(part, kind, n)]) for n in sizes}
            out[part][kind] = {str(n): {"ms": round(med[n], 2), "over_1": round(med[n] / med[1], 3)} for n in sizes}
            print(f"{part:9} {kind:16} " + " ".join(f"{med[n]:6.1f} {med[n] / med[1]:4.2f}x" for n in sizes))
    if wide:
        out["kernels_wide"] = {}
        for kind in WIDE:
            med = {n: statistics.median(times[("wide", kind, n)]) for n in [1] + wide}
            out["kernels_wide"][kind] = {
                str(n): {"ms": round(med[n], 2), "over_1": round(med[n] / med[1], 3)} for n in med
            }
            print(f"{'wide':9} {kind:16} " + " ".join(f"{'n=' + str(n)}: {med[n] / med[1]:4.2f}x" for n in wide))
    out["max_logit_difference"] = {str(n): _logit_gap(tgt, ids, n) for n in sizes if n > 1}
    print("largest logit difference from F.linear:", out["max_logit_difference"])
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
