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

.PHONY: demo test test-deep install install-dev docs readme gpu-test browser vendor site lab clean wheel
.DEFAULT_GOAL := demo

$(BIN)/python:
	$(PY) -m venv $(VENV)

# The CPU build of torch first, where no torch is importable; the package itself pins no torch.
TORCH_FIRST = $(BIN)/python -c "import torch" 2>/dev/null || $(PIP) $(TORCH_CPU)
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(TORCH_FIRST)
	$(PIP) -e ".[triton]"
	touch $@

# The package with every extra in one install (it holds the plain install too, so that counts as done).
# nixl: the `nixl` meta package depends on nixl-cu12 and nixl-cu13 on an unpinned torch, hence --no-deps.
NIXL := nixl==1.5.1 nixl-cu13==1.5.1
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(TORCH_FIRST)
	$(PIP) -e ".[dev,docs,triton]"
	$(PIP) --no-deps $(NIXL)
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# A wheel of the package, its data (weights, saved audits) included, in $(DIST): for a host that installs from a file
# (`pip install dist/vllm_pd_spec-*.whl` next to vLLM). Built from this tree with the venv's setuptools: no download.
DIST ?= dist
wheel: | $(BIN)/python
	$(BIN)/python -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" 2>/dev/null || $(PIP) "setuptools>=77"
	$(BIN)/python -m pip wheel -q --no-deps --no-build-isolation -w $(DIST) .
	@ls $(DIST)/vllm_pd_spec-*.whl

# The main job: the six experiments, fix off and on (the table in README.md), on CPU.
demo: install
	$(BIN)/vllm-pd-spec info
	$(BIN)/vllm-pd-spec reproduce --json reproduce.json
	@echo "results written to reproduce.json"

# Headless Chromium for the browser check (Debian's package), installed when missing.
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The tests in TEST_WORKERS processes, each test file's tests in one of them (its module fixtures built once).
TEST_WORKERS ?= 2
test: install-dev browser vendor
	$(BIN)/python tools/unchanged.py vllm_pd_spec,nbs -- $(BIN)/nbdev-export
	$(BIN)/python tools/unchanged.py nbs -- $(BIN)/nbdev-clean
	$(BIN)/nbdev-test --n-workers 2
	$(MAKE) --no-print-directory site SITE=$(SITE_TMP)
	$(BIN)/python tools/prep_docs.py check nbs $(SITE_TMP)
	$(BIN)/python tools/check_site.py $(SITE_TMP)
	$(BIN)/python tools/unchanged.py README.md -- $(BIN)/python tools/prep_docs.py readme _proc/index.ipynb README.md
	DOCS_DIR=$(SITE_TMP) $(BIN)/python -m pytest tests/ -q -n $(TEST_WORKERS) --dist loadfile
	@rm -rf $(SITE_TMP)

# The same tests, every property test with 1,000 examples (tests/conftest.py's 'deep' profile) against the committed site.
test-deep: install-dev
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest tests/ -q -n $(TEST_WORKERS) --dist loadfile

# KaTeX (math, typeset at build time under node) and Mermaid (diagrams, drawn to SVG at build time in headless
# Chromium; it does not ship), fetched by npm from its registry, pinned by version and integrity (tools/vendor.py).
vendor:
	@command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	$(BIN)/python tools/vendor.py .cache/vendor > /dev/null

# Build the site from the notebooks' saved outputs into $(SITE) (the notebooks become markdown pages).
site: vendor browser
	rm -rf _proc _site_src
	PATH="$(CURDIR)/tools/bin:$$PATH" $(BIN)/nbdev-proc-nbs --n-workers 2 > /dev/null
	$(BIN)/python tools/prep_docs.py _proc _site_src > /dev/null
	$(BIN)/mkdocs build -q -f _site_src/mkdocs.yml -d $(abspath $(SITE))

docs: install-dev
	$(MAKE) --no-print-directory site SITE=docs
	$(BIN)/python tools/prep_docs.py readme _proc/index.ipynb README.md
	touch docs/.nojekyll

# Open the notebooks in JupyterLab, with the package and its extras installed (pip install -e ".[jupyter]").
$(VENV)/.installed-lab: pyproject.toml $(VENV)/.installed
	$(PIP) -e ".[jupyter,triton]"
	touch $@

lab: $(VENV)/.installed-lab
	$(BIN)/jupyter lab --notebook-dir=nbs

# On a CUDA machine: the GPU and slow notebook cells, and the GPU-marked tests. Offline, with a python that already holds
# torch and triton: `make gpu-test GPU_PY=python3` installs nothing over the network; nbdev, execnb, ipython, fastcore and
# their pure-Python needs come from the wheels in $(WHL) (tools/gpu_wheels.txt says how to fetch them), unpacked into
# $(GPU_SITE). GPU_TEST_ARGS: more nbdev-test options (e.g. --n-workers 8). Fix 2's full sweep, a slow cell, runs one
# process per core, as tools/fix2_arms.py does.
GPU_PY ?=
WHL ?= .whl
GPU_SITE ?= /tmp/vllm-pd-spec-gpu-site
GPU_TEST_ARGS ?=
ifeq ($(GPU_PY),)
gpu-test: install-dev
	$(BIN)/nbdev-test --flags "gpu slow" $(GPU_TEST_ARGS)
	$(BIN)/python -m pytest tests/ -q -m "gpu or slow"
else
gpu-test:
	$(GPU_PY) -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $(GPU_SITE) $(WHL)/*.whl
	PYTHONPATH=$(GPU_SITE):$(CURDIR) $(GPU_PY) $(GPU_SITE)/bin/nbdev-test --flags "gpu slow" $(GPU_TEST_ARGS)
	PYTHONPATH=$(GPU_SITE):$(CURDIR) $(GPU_PY) -m pytest tests/ -q -m "gpu or slow" -p no:cacheprovider
endif

clean:
	rm -rf _proc _site_src build *.egg-info

# The soak of P/D pairs of the text models, every drafter at k 1-4 (nbs/61_soak): 10,000 requests of each text model
# in-process and 5,000 of both over NIXL with D pools of 24 and 32 blocks, two at a time (one core each): text-hybrid on
# one core; on the other the NIXL soak (it polls its transfers in real time: a core of its own), then text-attn. The
# reports kept in nbs/runs/soak.json; fails when any of the three does.
.PHONY: soak
soak: install-dev
	nice $(BIN)/vllm-pd-spec soak --requests 10000 --model text-hybrid --save soak & a=$$!; \
	rc=0; nice $(BIN)/vllm-pd-spec soak --requests 5000 --transport nixl --model text --d-blocks 24,32 --seed 2 --save soak || rc=$$?; \
	rb=0; nice $(BIN)/vllm-pd-spec soak --requests 10000 --model text-attn --seed 1 --save soak || rb=$$?; \
	ra=0; wait $$a || ra=$$?; echo "soak exit statuses: $$ra $$rb $$rc"; test $$ra$$rb$$rc = 000

# ---- Audit a real vLLM (nbs/72_audit): a CPU-only vLLM in its own venv; a CUDA torch is never installed. ----
# torch (CPU build) first and pinned by a constraint; vLLM's pure-Python requirements from its wheel's
# METADATA (tools/vllm_requirements.py drops torch* and the GPU kernel packages); then vLLM itself --no-deps.
# VLLM_VERSION defaults to the newest release with a saved audit (vllm_pd_spec/data/audit_vllm_<version>.json): no list
# of releases is kept here. One venv per release: .venv-vllm-<version>.
SAVED_RELEASES := $(shell ls vllm_pd_spec/data 2>/dev/null | sed -n 's/^audit_vllm_\([0-9.]*\)\.json$$/\1/p' | sort -V)
VLLM_VERSION ?= $(lastword $(SAVED_RELEASES))
VLLM_VENV ?= .venv-vllm-$(VLLM_VERSION)
VLLM_OLD_VERSION ?= $(firstword $(SAVED_RELEASES))
VLLM_OLD_VENV ?= .venv-vllm-$(VLLM_OLD_VERSION)
VLLM_WHEELS ?= .cache/vllm-wheels

.PHONY: audit test-vllm audit-old audit-release

# $(1): venv folder, $(2): vLLM version
define vllm_venv
	test -x $(1)/bin/python || $(PY) -m venv $(1)
	$(1)/bin/python -m pip install -q $(TORCH_CPU)
	$(1)/bin/python -c "import torch; print('torch==' + torch.__version__.split('+')[0])" > $(1)/constraints.txt
	$(PY) tools/vllm_requirements.py $(2) --wheel-dir $(VLLM_WHEELS) > $(1)/requirements-vllm.txt
	VLLM_TARGET_DEVICE=cpu $(1)/bin/python -m pip install -q -c $(1)/constraints.txt -r $(1)/requirements-vllm.txt msgpack
	VLLM_TARGET_DEVICE=cpu $(1)/bin/python -m pip install -q --no-deps "$$($(PY) tools/vllm_requirements.py $(2) --wheel-dir $(VLLM_WHEELS) --print-wheel)"
	$(1)/bin/python -m pip install -q -c $(1)/constraints.txt --no-deps -e .
	$(1)/bin/python -m pip install -q -c $(1)/constraints.txt numpy fastcore safetensors 'triton>=3.0' pytest hypothesis
	touch $(1)/.installed-vllm-$(2)
endef

# A release's venv (.venv-vllm-X.Y.Z/.installed-vllm-X.Y.Z), and this package again (--no-deps) in it whenever
# pyproject.toml changes (its entry points, the vLLM plugin included): rules for the releases named here and for V.
VLLM_MID_BASE ?= 0.33.0
define venv_rules
.venv-vllm-$(1)/.installed-vllm-$(1): tools/vllm_requirements.py
	$$(call vllm_venv,.venv-vllm-$(1),$(1))

.venv-vllm-$(1)/.installed-pkg: pyproject.toml .venv-vllm-$(1)/.installed-vllm-$(1)
	.venv-vllm-$(1)/bin/python -m pip install -q -c .venv-vllm-$(1)/constraints.txt --no-deps -e .
	touch $$@
endef
$(foreach v,$(sort $(VLLM_VERSION) $(VLLM_OLD_VERSION) $(VLLM_MID_BASE) $(V)),$(eval $(call venv_rules,$(v))))

# vLLM's own KV-connector test helpers (tests/v1/kv_connector/unit/utils.py), taken from its source release: pip
# downloads the sdist (preparing its metadata needs setuptools-rust and setuptools-scm; VLLM_TARGET_DEVICE=empty builds
# nothing), and only that file is extracted. tests/test_plugin_vllm.py builds its configs and requests with them.
VLLM_TEST_UTILS := .cache/vllm-tests/$(VLLM_VERSION)/kv_connector_utils.py
$(VLLM_TEST_UTILS): | $(VLLM_VENV)/.installed-vllm-$(VLLM_VERSION)
	$(VLLM_VENV)/bin/python -m pip install -q -c $(VLLM_VENV)/constraints.txt setuptools-rust setuptools-scm
	test -f $(VLLM_WHEELS)/vllm-$(VLLM_VERSION).tar.gz || VLLM_TARGET_DEVICE=empty VLLM_VERSION_OVERRIDE=$(VLLM_VERSION) \
	  $(VLLM_VENV)/bin/python -m pip download -q --no-deps --no-binary :all: --no-build-isolation vllm==$(VLLM_VERSION) -d $(VLLM_WHEELS)
	mkdir -p $(@D)
	tar -xzf $(VLLM_WHEELS)/vllm-$(VLLM_VERSION).tar.gz -O vllm-$(VLLM_VERSION)/tests/v1/kv_connector/unit/utils.py > $@.tmp
	mv $@.tmp $@

# A release's saved audit, in one command: `make audit-release V=X.Y.Z` builds .venv-vllm-X.Y.Z, runs the audit and
# writes vllm_pd_spec/data/audit_vllm_X.Y.Z.json (and the audit with the plugin, where the plugin knows the release;
# it refuses others with exit status 3). explain, the home table and the findings read whatever saved audits exist.
audit-release:
	@test -n "$(V)" || { echo 'usage: make audit-release V=X.Y.Z (a vLLM release)' >&2; exit 2; }
	$(MAKE) --no-print-directory .venv-vllm-$(V)/.installed-pkg
	HF_HUB_OFFLINE=1 .venv-vllm-$(V)/bin/vllm-pd-spec audit --json vllm_pd_spec/data/audit_vllm_$(V).json
	HF_HUB_OFFLINE=1 .venv-vllm-$(V)/bin/vllm-pd-spec audit --with-plugin --json vllm_pd_spec/data/audit_plugin_vllm_$(V).json \
	  || test $$? -eq 3

# The newest saved release again (tables without and with the plugin, the saved audits rewritten).
audit:
	$(MAKE) --no-print-directory audit-release V=$(VLLM_VERSION)

# The audit against the newest audited vLLM, its verdicts asserted against its saved audit (tests/test_audit_vllm.py),
# the plugin on vLLM's own connector schedulers (tests/test_plugin_vllm.py), the probes beyond the six, the lookahead-hash
# contract against vLLM's own functions case by case (tests/test_audit_hashes_vllm.py), our input
# kernels against vLLM's own (tests/test_kernel_upstream.py, through the Triton interpreter), plus the fake-vLLM unit
# tests; then the audit tables without and with the plugin.
test-vllm: $(VLLM_VENV)/.installed-vllm-$(VLLM_VERSION) $(VLLM_VENV)/.installed-pkg $(VLLM_TEST_UTILS)
	HF_HUB_OFFLINE=1 VLLM_KV_TEST_UTILS=$(VLLM_TEST_UTILS) $(VLLM_VENV)/bin/python -m pytest tests/test_audit_vllm.py \
	  tests/test_plugin_vllm.py tests/test_audit_beyond_vllm.py tests/test_audit_hashes_vllm.py tests/test_kernel_upstream.py \
	  tests/test_audit.py tests/test_plugin.py tests/test_audit_hashes.py \
	  -q -p no:cacheprovider
	HF_HUB_OFFLINE=1 $(VLLM_VENV)/bin/vllm-pd-spec audit 2>/dev/null
	HF_HUB_OFFLINE=1 $(VLLM_VENV)/bin/vllm-pd-spec audit --with-plugin 2>/dev/null

# vLLM 0.29.0's saved audit: the 0.29.0 wheel's Python sources, unpacked, over the newest release's venv dependencies
# (no compiled ops are needed by the probes).
VLLM_MID_VERSION ?= 0.29.0
VLLM_MID_SRC ?= $(VLLM_WHEELS)/src-$(VLLM_MID_VERSION)
.PHONY: audit-mid
audit-mid: .venv-vllm-$(VLLM_MID_BASE)/.installed-pkg
	test -d $(VLLM_MID_SRC)/vllm || ( (test -f $(VLLM_WHEELS)/vllm-$(VLLM_MID_VERSION)-*.whl || \
	  .venv-vllm-$(VLLM_MID_BASE)/bin/pip download --no-deps vllm==$(VLLM_MID_VERSION) -d $(VLLM_WHEELS)) && mkdir -p $(VLLM_MID_SRC) && \
	  cd $(VLLM_MID_SRC) && unzip -q ../vllm-$(VLLM_MID_VERSION)-*.whl 'vllm/*' -x '*.so')
	HF_HUB_OFFLINE=1 PYTHONPATH=$(VLLM_MID_SRC):$(CURDIR) .venv-vllm-$(VLLM_MID_BASE)/bin/vllm-pd-spec audit \
	  --json vllm_pd_spec/data/audit_vllm_$(VLLM_MID_VERSION).json

# The oldest saved release (0.27.1: before the ordering and backoff fixes; the plugin refuses it: exit status 3), its
# verdicts asserted against its saved audit.
audit-old: $(VLLM_OLD_VENV)/.installed-vllm-$(VLLM_OLD_VERSION) $(VLLM_OLD_VENV)/.installed-pkg
	HF_HUB_OFFLINE=1 $(VLLM_OLD_VENV)/bin/vllm-pd-spec audit --json vllm_pd_spec/data/audit_vllm_$(VLLM_OLD_VERSION).json
	HF_HUB_OFFLINE=1 $(VLLM_OLD_VENV)/bin/vllm-pd-spec audit --with-plugin || test $$? -eq 3
	HF_HUB_OFFLINE=1 $(VLLM_OLD_VENV)/bin/python -m pytest tests/test_audit_vllm.py -q -p no:cacheprovider
