# Two commands on a fresh machine: `make demo` and `make test`. See README.md.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_CPU ?= torch==2.13.0
export NO_MKDOCS_2_WARNING := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PIP := $(BIN)/python -m pip install -q
SITE_TMP := $(shell mktemp -u -d /tmp/vllm-pd-spec-site.XXXXXX)

.PHONY: demo test install install-dev docs readme gpu-test browser clean
.DEFAULT_GOAL := demo

$(BIN)/python:
	$(PY) -m venv $(VENV)

# The CPU build of torch first, where no torch is importable; the package itself pins no torch.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(PIP) $(TORCH_CPU)
	$(PIP) -e ".[triton]"
	touch $@

# nixl: the `nixl` meta package depends on nixl-cu12 and nixl-cu13 on an unpinned torch, hence --no-deps.
NIXL := nixl==1.5.1 nixl-cu13==1.5.1
$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(PIP) -e ".[dev,docs,triton]"
	$(PIP) --no-deps $(NIXL)
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: install
	$(BIN)/vllm-pd-spec info

# Headless Chromium for the browser check (Debian's package), installed when missing.
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

test: install-dev browser
	$(BIN)/python tools/unchanged.py vllm_pd_spec,nbs -- $(BIN)/nbdev-export
	$(BIN)/python tools/unchanged.py nbs -- $(BIN)/nbdev-clean
	$(BIN)/nbdev-test --n-workers 2
	$(MAKE) --no-print-directory site SITE=$(SITE_TMP)
	$(BIN)/python tools/prep_docs.py check nbs $(SITE_TMP)
	$(BIN)/python tools/unchanged.py README.md -- $(BIN)/python tools/prep_docs.py readme _proc/index.ipynb README.md
	DOCS_DIR=$(SITE_TMP) $(BIN)/python -m pytest tests/ -q
	@rm -rf $(SITE_TMP)

# Build the site from the notebooks' saved outputs into $(SITE).
site:
	rm -rf _proc _site_src
	PATH="$(CURDIR)/tools/bin:$$PATH" $(BIN)/nbdev-proc-nbs --n-workers 2 > /dev/null
	$(BIN)/python tools/prep_docs.py _proc _site_src > /dev/null
	$(BIN)/mkdocs build -q -f _site_src/mkdocs.yml -d $(abspath $(SITE))

docs: install-dev
	$(MAKE) --no-print-directory site SITE=docs
	$(BIN)/python tools/prep_docs.py readme _proc/index.ipynb README.md
	touch docs/.nojekyll

# On a CUDA machine: the GPU and slow notebook cells, and the GPU-marked tests.
gpu-test: install-dev
	$(BIN)/nbdev-test --flags "gpu slow"
	$(BIN)/python -m pytest tests/ -q -m "gpu or slow"

clean:
	rm -rf _proc _site_src build *.egg-info
