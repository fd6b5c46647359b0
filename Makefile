# Two commands: `make run` starts the app, `make test` runs the tests. Both set up .venv first.
VENV ?= .venv
PY := $(VENV)/bin/python
# esm.cpp, the second peer of `make bench`, needs numpy<2 (JAX needs >=2): its own environment.
ESMCPP_VENV ?= .venv-esmcpp
PIP := $(PY) -m pip
PORT ?= 8501
# Local mode reads files on this machine (the structure path box, local checkpoints): listen on
# this machine only. `make run HOST=0.0.0.0` exposes it to the network (see README).
HOST ?= 127.0.0.1

.PHONY: run test bench install install-test browser peer-corpus clean lock viewer-js

run: install
	$(VENV)/bin/streamlit run app.py --server.address $(HOST) --server.port $(PORT)

# On every core (at most 4 workers: each holds JAX and a model), the longest groups first; the
# run ends with the time by kind and the 15 slowest tests (tests/suite_timing.py, docs/testing.md).
test: install-test browser peer-corpus
	$(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadscope --no-loadscope-reorder

# One shape per run keeps each under half an hour on 2 cores: `make bench SHAPES=t30` (any of
# t6,t12,t30,t33; default all, about 75 minutes on 2 cores), `WORKLOADS=latency,varlen` (any of cold,latency,varlen,
# scan,gates; default all). Each run appends its table, named by the CPU and its instruction
# sets, to docs/benchmarks.md; BENCH_ARGS=--quick for a t6-only check that writes nothing there.
SHAPES ?=
WORKLOADS ?=
bench: install-test $(ESMCPP_VENV)/.installed
	$(PY) benchmarks/run.py --esmcpp-python $(ESMCPP_VENV)/bin/python $(if $(SHAPES),--shapes $(SHAPES)) \
		$(if $(WORKLOADS),--workloads $(WORKLOADS)) $(BENCH_ARGS)

$(ESMCPP_VENV)/.installed: benchmarks/requirements-esmcpp.txt
	python3 -m venv $(ESMCPP_VENV)
	$(ESMCPP_VENV)/bin/python -m pip install --quiet -r benchmarks/requirements-esmcpp.txt
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# Reinstall when the dependency list or the fused attention kernel's source changes (the
# install compiles it when a C++ compiler is present; without one flamino uses pure JAX).
KERNEL_SOURCES := setup.py $(wildcard csrc/*.cc csrc/*.h)
$(VENV)/.installed: pyproject.toml $(KERNEL_SOURCES) | $(PY)
	$(PIP) install --quiet -e .
	touch $@

# torch is pinned to the CPU wheel in pyproject (a looser spec pulls a multi-GB CUDA build).
$(VENV)/.installed-test: pyproject.toml $(KERNEL_SOURCES) | $(PY)
	$(PIP) install --quiet -e ".[test]"
	touch $@ $(VENV)/.installed

# Biopython's own test files (Tests/ of its PyPI source distribution, tests/data/SOURCES.md), read by
# tests/integration/test_peer_corpus.py; downloaded once into test-artifacts/ (never committed).
peer-corpus: install-test
	$(PY) tests/peer_corpus.py

# The browser test drives Debian's Chromium (Playwright's own browser download fails here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "install Debian's chromium (sudo apt-get install chromium) for the browser test"; exit 1; fi; }

# The Structure page's molecular viewer script, fetched again from the npm registry at the pinned
# release and checked against the digest in app_pages/_ui/structure/molecule_view.py (the file is committed:
# the hosted deployments install from requirements.txt alone; see docs/structure.md).
VIEWER_VENDOR := app_pages/_ui/structure/molecule_viewer/vendor
viewer-js:
	@version=$$($(PY) -c "import re; print(re.search(r'VENDOR_VERSION = \"([^\"]+)\"', open('app_pages/_ui/structure/molecule_view.py').read())[1])"); \
	digest=$$($(PY) -c "import re; print(re.search(r'VENDOR_SHA256 = \"([0-9a-f]+)\"', open('app_pages/_ui/structure/molecule_view.py').read())[1])"); \
	tmp=$$(mktemp -d) && cd $$tmp && npm pack --silent 3dmol@$$version >/dev/null && tar xzf 3dmol-$$version.tgz && \
	echo "$$digest  package/build/3Dmol-min.js" | sha256sum -c - && cd - >/dev/null && \
	cp $$tmp/package/build/3Dmol-min.js $$tmp/package/build/3Dmol-min.js.LICENSE.txt $(VIEWER_VENDOR)/ && \
	cp $$tmp/package/LICENSE $(VIEWER_VENDOR)/3Dmol-LICENSE.txt && rm -rf $$tmp && echo "3Dmol.js $$version in $(VIEWER_VENDOR)"

clean:
	rm -rf $(VENV) $(ESMCPP_VENV) .pytest_cache test-artifacts build flamino_core/model/_attention_cpu*.so

# Pin the runtime dependencies for the hosted deployments (requirements.txt).
lock: | $(PY)
	$(PIP) install --dry-run --ignore-installed --quiet --report /tmp/flamino-lock.json .
	{ head -2 requirements.txt; $(PY) -c "import json; r = json.load(open('/tmp/flamino-lock.json')); \
	  print('\n'.join(sorted(f\"{i['metadata']['name']}=={i['metadata']['version']}\" for i in r['install'] \
	  if i['metadata']['name'] != 'flamino'), key=str.lower))"; echo .; } > requirements.txt.new
	mv requirements.txt.new requirements.txt

# The hosted demo under load: 8 browser sessions for 3 minutes (not part of `make test`).
# Updates the numbers in docs/reliability.md; e.g. LOADTEST_ARGS="--duration 60 --report none";
# LOADTEST_ARGS="--attacker" adds the hostile tab of issue #26 (its own block in the report).
.PHONY: loadtest
loadtest: install-test browser
	$(PY) loadtest/run.py $(LOADTEST_ARGS)
