# rsocket_tx developer targets.  Everything a fresh machine needs (python3 >= 3.10 with venv,
# node 20 + npm for the rsocket-js interop peers) is installed by these targets.
#
#   make venv   create .venv and install rsocket_tx (editable) with the dev extras
#   make peers  npm-install the rsocket-js interop peers into tests/interop/peers/
#   make test   venv + peers, then the whole pytest suite (interop included)
#   make lint   ruff check .
#   make docs   Sphinx HTML into docs/_build/html, warnings are errors
#   make demo   twistd rsocket server on 127.0.0.1:7878 + one rsocket-tx CLI call per interaction model
#   make bench  python -m benchmarks.run
#   make browser   npm-build the example browser page into examples/browser/dist/
#   make chromium  install Debian's chromium + chromium-driver (for the browser page test) if missing
#   make pipeline  the NYC flights 2013 Spark pipeline, end to end (local mode)

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.rsocket_tx-installed
# extra pytest arguments, e.g.  make test PYTEST_ARGS='tests/interop -x'
PYTEST_ARGS ?=

.PHONY: venv peers browser chromium test lint docs demo bench pipeline clean

venv: $(STAMP)

# The .pth file puts the repository root on sys.path: twistd finds its plugins by scanning
# sys.path for twisted/plugins/ directories, and the source tree's
# twisted/plugins/rsocket_tx_plugin.py is not part of an editable install otherwise.
$(STAMP): setup.cfg pyproject.toml Makefile
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[dev]'
	$(VPY) -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "rsocket_tx-source-tree.pth").write_text(str(pathlib.Path.cwd()) + "\n")'
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

docs: venv
	$(VENV)/bin/sphinx-build -W --keep-going -b html docs docs/_build/html

demo: venv
	bash scripts/demo.sh

bench: venv
	$(VPY) -m benchmarks.run

pipeline: venv
	bash examples/flights/run.sh

clean:
	rm -rf docs/_build build dist *.egg-info
