import os
import tempfile

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("FROM_SCRATCH_STEPS", "150")  # lesson 1 trains for 3 minutes; its checks run on 150 steps
os.environ.setdefault("LESSON_DRAFTER_PROMPTS", "2")  # lesson 21 trains a SmolLM2 drafter on 12 answers of 64 tokens
os.environ.setdefault("LESSON_DRAFTER_STEPS", "2")  # for 60 steps and decodes one answer with it; its checks run on 2
os.environ.setdefault("LESSON_DRAFTER_TOKENS", "24")  # answers of 24 tokens and 2 steps
# compiled kernels of this run only: a cache left by a run under other CPU settings (ATEN_CPU_CAPABILITY, say) is not
# reused (a CI run once aborted inside a cached Inductor kernel after an AVX2-emulated run on the same machine)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mdlm_kit_inductor_"))
import json
from pathlib import Path
import pytest
import torch

# under pytest-xdist (`make test` runs two workers) each worker and the processes it starts use one thread: two
# workers then share the two cores instead of four threads fighting over them
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
else:
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

ROOT = Path(__file__).resolve().parents[1]
# the CPUs the suite simulates (lesson 02's probe reads MDLM_KIT_CPU): an AVX2 laptop, whose kernels run for real (ATen
# and oneDNN held to AVX2; oneDNN then refuses to pack bf16), and an arm64 CPU (no x86 path at all: the probe's answer)
LAPTOP_CPU = {"MDLM_KIT_CPU": "x86_64:avx2 fma f16c", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
ARM64_CPU = {"MDLM_KIT_CPU": "aarch64:asimd"}


def simulated_cpu_env(extra: dict) -> dict:
    "This process's environment with `extra`, and compiled kernels of its own (made under other CPU settings)."
    own = {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="mdlm_kit_inductor_sim_")}
    return os.environ | {"PYTHONUNBUFFERED": "1"} | own | extra


def is_x86() -> bool:
    "Whether an x86 CPU can be simulated here (its kernels run for real on an x86 machine only)."
    import platform

    return platform.machine().lower() in ("x86_64", "amd64")


def tiny_toml(corpus, *overrides: str) -> str:
    "configs/tiny.toml (the smallest MDLM run that trains) on `corpus`, with `overrides` (`training.max_steps=40`)."
    from mdlm_kit.core.config import apply_overrides, load_config, to_toml

    cfg = load_config(ROOT / "configs" / "tiny.toml")
    return to_toml(apply_overrides(cfg, [f"data.corpus={json.dumps(str(corpus))}", *overrides]))


# the longest tests first: `make test` runs two pytest-xdist workers, which take the tests one at a time in this order,
# so the two longest start at once instead of one waiting for the other at the end
LONGEST_FIRST = ("test_jupyterlab.py", "test_quickstart.py", "test_cpu_paths.py", "test_gpu_check.py")


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = item.path.name
        return (
            LONGEST_FIRST.index(name)
            if name in LONGEST_FIRST
            else len(LONGEST_FIRST) + (not item.get_closest_marker("slow"))
        )

    items.sort(key=rank)  # stable: the file order holds inside each rank
    # pytest-xdist starts each worker on two consecutive tests (its smallest first chunk, whatever --maxschedchunk
    # says): a quick test goes second and fourth, so the two longest tests start at once, one on each worker
    quick = [i for i in items if i.path.name not in LONGEST_FIRST and not i.get_closest_marker("slow")][:2]
    if len(items) > 4 and len(quick) == 2:
        for at, item in zip((1, 3), quick):
            items.remove(item)
            items.insert(at, item)


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> Path:
    "About 80 KB of real English: Python's reference topics."
    from mdlm_kit.text.data import reference_topics

    p = tmp_path_factory.mktemp("corpus") / "topics.txt"
    p.write_text("\n\n".join(list(reference_topics().values())[:20]), encoding="utf-8")
    return p


@pytest.fixture
def tiny_config(tmp_path, corpus_file) -> Path:
    p = tmp_path / "tiny.toml"
    p.write_text(tiny_toml(corpus_file))
    return p


def read_events(run_dir: Path, kind: str | None = None) -> list[dict]:
    evs = [json.loads(l) for l in (Path(run_dir) / "events.jsonl").read_text().splitlines() if l.strip()]
    return [e for e in evs if kind is None or e["event"] == kind]


def tree_digest(path: Path) -> dict:
    """Every file's contents, every link's target and every directory under `path`: proof that a failed command changed
    nothing."""
    import hashlib

    out = {}
    for p in sorted(Path(path).rglob("*")):
        key = str(p.relative_to(path))
        if p.is_symlink():
            out[key] = "link -> " + os.readlink(p)
        elif p.is_dir():
            out[key] = "dir"
        else:
            out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# The browser tests drive Debian's chromium here; elsewhere (GitHub's runners) point this at any Chromium binary,
# e.g. the one `python -m playwright install chromium` downloads.
CHROMIUM = os.environ.get("MDLM_KIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_MISSING = (
    f"no browser at {CHROMIUM}: install it with `apt-get install -y chromium` (make test does this as root), "
    "or set MDLM_KIT_CHROMIUM to a Chromium binary; playwright itself needs no `playwright install`."
)


# what every tiny drafter test shares (the CPU, fp32, batches of 2); each test adds the settings it is about
TINY_DRAFT = {"batch_size": 2, "eval_interval": 100, "device": "cpu", "precision": "fp32"}
TINY_DFLASH = {"block_size": 4, "num_feature_layers": 2, "num_anchors": 6}
TINY_EAGLE3 = {"ttt_length": 3, "draft_vocab_size": 64}
TINY_STEPS = {"gradient_accumulation_steps": 2, "num_epochs": 2, "log_interval": 1, "save_interval": 2}


TINY_OWN = {"dflash": TINY_DFLASH, "eagle3": TINY_EAGLE3}  # each drafter's own tiny settings, by name


def tiny_draft_config(chat, algorithm: str = "dflash", **settings):
    """A config of an `algorithm` run for a tiny target on the CPU, trained on the chat file `chat`; `settings` add or
    replace."""
    from mdlm_kit.drafts.train import DraftTrainConfig

    return DraftTrainConfig.from_flags(algorithm, **{**TINY_DRAFT, "train_data_path": str(chat), **settings})


def logged_step(trainer) -> dict:
    "One training step of `trainer`, as its `train` event reports it (the step's tensors read back, then summarised)."
    from mdlm_kit.core.loop import host_records

    return trainer.train_record(host_records([trainer.train_step()]), 1.0)


def save_tiny_target_and_chat(
    directory: Path, arch: str = "llama", n: int = 6, num_layers: int = 5, answer_chars: int = 300, name: str = "t"
):
    """A tiny target of `num_layers` saved to DIR/NAME and a chat file DIR/chat.jsonl of n conversations (Python's
    reference topics as answers, cut at `answer_chars`)."""
    from mdlm_kit.drafts.chat_data import topics_chat
    from mdlm_kit.drafts.targets import tiny_target

    tgt = tiny_target(arch, num_layers=num_layers)
    tgt.model.save_pretrained(directory / name)
    tgt.tokenizer.save_pretrained(directory / name)
    topics_chat(directory / "chat.jsonl", n, answer_chars=answer_chars)
    return tgt
