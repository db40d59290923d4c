"""What one target forward costs by weight precision: the cost model behind speculative decoding on this machine.

    python bench/decode_precision.py            # SmolLM2-135M-Instruct, fp32 / bf16 / int8 dynamic
    python bench/decode_precision.py --precisions fp32,bf16,int8-rows --packed   # the kit's int8 target too

For each precision, one process, after a warm-up, interleaved over rounds: a 41-token chat prompt is prefilled into
a `CachedTarget`, then `extend` runs n new tokens and `crop`s back (n = 1 is a plain decode step, n = k+1 verifies k
drafts); the prefill of the prompt; one decode step for a batch of 16 sequences (self-distillation data generation);
and `plain_decode` of 32 tokens (prefill included). Medians of the rounds.
A batch-1 step reads every weight once, so its time follows the bytes per weight; the ratio extend(n) / extend(1)
is what verifying n tokens costs in plain steps. int8 (torch.ao dynamic quantisation of the Linear layers) is a
different model: its greedy tokens are compared with the fp32 target's. `int8-rows` is the kit's int8 target
(`--precision int8`, `decoding_target`: a scale per row, `Int8RowsLinear`, and attention one row at a time), exact in
verification and also a different model. A bf16 target decodes with `exact_rows`
(packed linears, attention one row at a time: `CachedTarget` switches it), so `--packed` gives fp32 the same products.
"""

import json, statistics, sys, time
from pathlib import Path
import torch
from mdlm_kit.core.device import inference_precision, machine_summary
from mdlm_kit.core.layers import few_rows_linears
from mdlm_kit.drafts.verification import CachedTarget, plain_decode
from mdlm_kit.drafts.targets import TargetModel, decoding_target, exact_rows
from bench_flags import bench_parser

PROMPT = [{"role": "user", "content": "Explain in two sentences why the sky is blue, and give one example."}]


def prompt_ids(tok) -> list[int]:
    "The probe prompt through the target's chat template, ready for the assistant's answer."
    return tok.apply_chat_template(PROMPT, tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"]


def _int8(tgt):
    from torch.ao.quantization import quantize_dynamic

    plain = few_rows_linears(tgt.model, enable=False)  # quantize_dynamic maps nn.Linear only
    q = quantize_dynamic(plain, {torch.nn.Linear}, dtype=torch.qint8)
    return TargetModel(q, tgt.tokenizer, name=tgt.name + "-int8")


def _prefill_ms(tgt, ids):
    t0 = time.perf_counter()
    CachedTarget(tgt).extend(ids)
    return (time.perf_counter() - t0) * 1e3


def _extend_ms(tgt, ids, n):
    ct = CachedTarget(tgt)
    ct.extend(ids)
    start = ct.length
    new = torch.full((1, n), 42)
    t0 = time.perf_counter()
    ct.extend(new)
    dt = time.perf_counter() - t0
    ct.crop(start)
    return dt * 1e3


@torch.no_grad()
def _batch_step_ms(tgt, ids, batch):
    m = tgt.model
    x = ids.repeat(batch, 1)
    out = m(input_ids=x, use_cache=True)
    t0 = time.perf_counter()
    m(input_ids=torch.full((batch, 1), 42), past_key_values=out.past_key_values, use_cache=True)
    return (time.perf_counter() - t0) * 1e3


def main():
    ap = bench_parser(__doc__, "decode_precision.json")
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--sizes", default="1,2,4,8,16")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument(
        "--packed",
        action="store_true",
        help="fp32 and bf16 with the decoders' products: one row as two, 3-128 rows packed (PackedLinear; bf16 also "
        "attends one row at a time, exact_rows, as every CPU decode in bf16 does)",
    )
    args = ap.parse_args()
    base = TargetModel.from_pretrained(args.target)
    names = args.precisions.split(",")
    models = {}
    for p in names:
        if p == "fp32":
            models[p] = base
        elif p == "bf16":
            models[p] = exact_rows(TargetModel.from_pretrained(args.target, dtype=torch.bfloat16))
        elif p == "int8":
            models[p] = _int8(TargetModel.from_pretrained(args.target))
        elif p == "int8-rows":
            cpu = torch.device("cpu")
            models[p] = decoding_target(args.target, cpu, inference_precision("int8", cpu, verifies=True))
        else:
            raise SystemExit(f"unknown precision {p!r}")
        if args.packed and p in ("fp32", "bf16"):
            few_rows_linears(models[p].model, one_row=True, packed=True)
    tok = base.tokenizer
    ids = prompt_ids(tok)
    ids_t = torch.tensor([ids])
    sizes = [int(s) for s in args.sizes.split(",")]
    times = {p: {n: [] for n in sizes} | {"batch16": [], "decode": [], "prefill": []} for p in names}
    tokens = {}
    for p in names:  # warm-up
        _extend_ms(models[p], ids_t, 1)
        tokens[p] = plain_decode(models[p], ids, args.decode_tokens).tokens
    for r in range(args.rounds):  # interleaved: every precision and size once per round
        for p in names if r % 2 == 0 else names[::-1]:
            for n in sizes:
                times[p][n].append(_extend_ms(models[p], ids_t, n))
            times[p]["prefill"].append(_prefill_ms(models[p], ids_t))
            times[p]["batch16"].append(_batch_step_ms(models[p], ids_t, 16))
            res = plain_decode(models[p], ids, args.decode_tokens)
            times[p]["decode"].append(len(res.tokens) / res.total_time)
    out = {"prompt_tokens": len(ids), "threads": torch.get_num_threads(), "rounds": args.rounds, "packed": args.packed}
    out["command"] = "python " + " ".join(sys.argv)
    out["machine"] = machine_summary()  # the CPU flags and paths these figures come from
    print(f"prompt {len(ids)} tokens, {torch.get_num_threads()} threads, medians of {args.rounds} interleaved rounds")
    print(
        f"{'precision':10} "
        + " ".join(f"{'ext ' + str(n) + ' ms':>10}" for n in sizes)
        + f" {'x16 step ms':>12} {'prefill ms':>11} {'plain tok/s':>12}  ext n / ext 1      same tokens as fp32"
    )
    for p in names:
        med = {n: statistics.median(times[p][n]) for n in sizes}
        row = {f"extend_{n}_ms": round(med[n], 2) for n in sizes}
        row.update(
            {f"extend_{n}_over_1": round(med[n] / med[1], 3) for n in sizes},
            batch16_step_ms=round(statistics.median(times[p]["batch16"]), 1),
            prefill_ms=round(statistics.median(times[p]["prefill"]), 1),
            plain_tokens_per_s=round(statistics.median(times[p]["decode"]), 1),
            greedy_equal_to_fp32=tokens[p] == tokens.get("fp32", tokens[p]),
        )
        out[p] = row
        print(
            f"{p:10} " + " ".join(f"{med[n]:10.1f}" for n in sizes) + f" {row['batch16_step_ms']:12.1f}"
            f" {row['prefill_ms']:11.1f} {row['plain_tokens_per_s']:12.1f}  "
            + " ".join(f"{med[n] / med[1]:.2f}" for n in sizes)
            + f"   {row['greedy_equal_to_fp32']}"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
