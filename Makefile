# simgrag developer entry points. Two commands matter (README):
#   make demo   install, then answer a question on the bundled sample KG with the embedded models
#   make test   install, then run ruff, mypy and the test suite (CI runs exactly this)
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

.PHONY: install demo test lint typecheck web-deps chromium web-assets bench-retrieval print-llama-flags clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install --quiet -c constraints.txt -e ".[llamacpp,milvus,scale,bench,rdf,graphdb,mcp,heldout,dev]"
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

test: lint typecheck web-deps chromium
	$(PY) -m pytest -q

bench-retrieval: install
	$(PY) benchmarks/retrieval_metaqa.py --metaqa-dir ../shared/data/MetaQA --index-dir runs/metaqa.idx

print-llama-flags:
	@echo $(LLAMA_CMAKE_ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
