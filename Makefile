# simgrag developer entry points. Two commands matter (README):
#   make demo   install, then answer a question on the bundled sample KG with the embedded models
#   make test   install, then run ruff, mypy, the docs build, the wheel check and the test suite (CI runs exactly this)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# llama.cpp must be built without GGML_NATIVE here: a native build uses AMX and segfaults on these
# CPUs. AVX-512 (+VNNI/VBMI) is switched on when this CPU has it: prompt evaluation ~1.4x faster.
CPU_FLAGS := $(shell grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
has_flag   = $(filter $(1),$(CPU_FLAGS))
AVX512     := $(and $(call has_flag,avx512f),$(call has_flag,avx512bw),$(call has_flag,avx512vl),$(call has_flag,avx512dq),$(call has_flag,avx512cd))
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
	$(if $(AVX512),-DGGML_AVX512=ON) \
	$(if $(and $(AVX512),$(call has_flag,avx512_vnni)),-DGGML_AVX512_VNNI=ON) \
	$(if $(and $(AVX512),$(call has_flag,avx512vbmi)),-DGGML_AVX512_VBMI=ON)
STAMP  := $(VENV)/.installed
QUESTION ?= Who directed Inception?

.PHONY: install demo test lint typecheck docs dist wheel-check web-deps chromium web-assets bench-retrieval print-llama-flags clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install --quiet -c constraints.txt -e ".[llamacpp,milvus,scale,bench,rdf,graphdb,mcp,heldout,dev,docs]"
	$(VENV)/bin/simgrag models pull
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/simgrag demo "$(QUESTION)"

lint: install
	$(VENV)/bin/ruff check src tests benchmarks scripts

typecheck: install
	$(VENV)/bin/mypy

# the browser test: playwright-core from npm, Debian's Chromium (skipped with a reason when absent)
web-deps: web/node_modules/.package-lock.json

web/node_modules/.package-lock.json: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error

chromium:
	@if [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "Chromium is missing (sudo apt-get install chromium); the browser test will be skipped" \
		"(it fails instead under SIMGRAG_REQUIRE_BROWSER=1, as in CI)"; fi

# refresh the vendored cytoscape.js after changing web/package.json
web-assets: web-deps
	cd web && node vendor.mjs

# the docs site: warnings are errors, internal links and anchors are checked (mkdocs.yml `validation:`); the CLI
# reference is generated from the typer app, the API reference from docstrings; nothing is fetched
SITE ?= build/site
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean --site-dir $(SITE)

# the release artefacts: wheel + sdist (no build isolation: setuptools and wheel come from the venv) and twine's check
dist: install
	rm -rf dist
	$(PY) -m build --no-isolation --outdir dist .
	$(VENV)/bin/twine check --strict dist/*

# The wheel must install into a fresh venv and answer there. Reinstalling its dependencies would fetch torch
# (~800 MB) again, so the fresh venv sees $(VENV)'s site-packages through a .pth file that holds only that path:
# a plain path line adds the directory to sys.path but does not run the .pth files inside it, so the editable
# install of this checkout (a .pth of its own) stays inactive and `import simgrag` finds the wheel's copy, which
# is installed with --no-deps into the fresh venv's own site-packages (earlier on sys.path than the added one).
# Run from /tmp, so that no source tree is on the path; the models come from ~/.cache/simgrag (nothing downloaded).
WHEEL_VENV ?= build/wheel-venv
wheel-check: dist
	rm -rf $(WHEEL_VENV)
	"$$($(PY) -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')" -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))' > $(WHEEL_VENV)/.purelib
	$(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))' > "$$(cat $(WHEEL_VENV)/.purelib)/simgrag-dev-deps.pth"
	$(WHEEL_VENV)/bin/python -m pip install --quiet --no-deps --no-index dist/simgrag-*.whl
	$(PY) -m zipfile -l dist/simgrag-*.whl | grep 'simgrag/data/sample/movies.txt' >/dev/null
	$(PY) -m zipfile -l dist/simgrag-*.whl | grep 'simgrag/data/examples/metaqa.yaml' >/dev/null
	cd /tmp && $(abspath $(WHEEL_VENV))/bin/python -c 'import simgrag, sys; \
		sys.exit(0 if "$(abspath $(WHEEL_VENV))" in simgrag.__file__ else "simgrag imported from " + simgrag.__file__)'
	cd /tmp && $(abspath $(WHEEL_VENV))/bin/simgrag --version | grep -qx "simgrag $$(sed -n 's/^version = "\(.*\)"/\1/p' $(abspath pyproject.toml))"
	cd /tmp && $(abspath $(WHEEL_VENV))/bin/simgrag demo "Who directed Inception?" | tee $(abspath $(WHEEL_VENV))/demo.txt
	grep -q "Christopher Nolan" $(WHEEL_VENV)/demo.txt

test: lint typecheck docs wheel-check web-deps chromium
	$(PY) -m pytest -q

bench-retrieval: install
	$(PY) benchmarks/retrieval_metaqa.py --metaqa-dir ../shared/data/MetaQA --index-dir runs/metaqa.idx

print-llama-flags:
	@echo $(LLAMA_CMAKE_ARGS)

clean:
	rm -rf $(VENV) runs build dist .pytest_cache .mypy_cache .ruff_cache
