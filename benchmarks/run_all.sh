#!/usr/bin/env bash
# Re-run the commands behind each table of BENCHMARKS.md, one area at a time (the commands recorded there).
#
#   bash benchmarks/run_all.sh --list                 the areas
#   bash benchmarks/run_all.sh [--dry-run] AREA...    run (or print) the commands of these areas; `all` = every area
#
# Settings (environment): METAQA (MetaQA folder, default ../shared/data/MetaQA), WC (WorldCup2014 folder, default
# ../shared/data/WC2014), RUNS (output folder, default runs), SIMGRAG / PY (the CLI and the interpreter, default
# .venv/bin/...). Most areas need hours of LLM time on 2 CPU cores and are resumable: run the same line again.
# Figures are read from the rows and summaries the commands write; nothing here edits BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

METAQA=${METAQA:-../shared/data/MetaQA}
WC=${WC:-../shared/data/WC2014}
RUNS=${RUNS:-runs}
SIMGRAG=${SIMGRAG:-.venv/bin/simgrag}
PY=${PY:-.venv/bin/python}
DRY=0
AREAS=(retrieval qa verify abstention retrievers robustness speed scale reliability sources pattern-stage)

run() {   # print a command, then run it (unless --dry-run)
    printf '+ %s\n' "$*"
    if [ "$DRY" = 0 ]; then eval "$@"; fi
}

note() { printf '# %s\n' "$*"; }

metaqa_index() {   # the MetaQA MiniLM index `simgrag bench` builds and caches (its path holds a content hash)
    ls -d "${SIMGRAG_CACHE_DIR:-$HOME/.cache/simgrag}"/metaqa-minilm-*.idx 2>/dev/null | head -1 || true
}

area_retrieval() {
    run "$PY benchmarks/retrieval_metaqa.py --metaqa-dir $METAQA --per-hop 300 --naive-sample 0 --out $RUNS/retrieval_metaqa.json"
    run "$PY benchmarks/retrieval_metaqa.py --metaqa-dir $METAQA --per-hop 300 --naive-sample 0 --matching injective --out $RUNS/ret_injective.json"
    run "$PY benchmarks/retrieval_metaqa.py --metaqa-dir $METAQA --per-hop 1000 --naive-sample 100 --out $RUNS/retrieval_naive.json"
    note "HNSW settings: build an index first (the speed area's command), then"
    run "$PY benchmarks/hnsw_settings.py --index-dir /tmp/mq-now.idx --metaqa-dir $METAQA --settings 32x100,32x100xfp16 --ef-search 128,256"
}

area_qa() {
    run "$SIMGRAG bench metaqa --metaqa-dir $METAQA --hops 1,2,3 --sample 300 --seed 0 --answer-mode auto --llm-cache default --no-resume -o $RUNS/full/metaqa_test.jsonl"
    run "$PY benchmarks/heldout_eval.py --set metaqa-reworded,metaqa-reworded-lto --per-hop 100 --metaqa-dir $METAQA --llm-cache default --out $RUNS/heldout/mq"
    run "$PY benchmarks/heldout_eval.py --set metaqa-dev --per-hop 100 --metaqa-dir $METAQA --llm-cache default --out $RUNS/heldout/mq-dev"
    run "$PY benchmarks/heldout_eval.py --set geo --llm-cache default --out $RUNS/heldout/geo"
    run "$PY benchmarks/heldout_eval.py --set geo-wc --llm-cache default --out $RUNS/heldout/geo-wc"
    note "bootstrapped files (drafts differ between runs by a question or two per hop); the geo-wc KG file is written by --set geo-wc"
    run "$SIMGRAG index $RUNS/heldout/geo_kg.txt -o $RUNS/geo12/geo-boot.idx --bootstrap-aliases --overwrite --llm-cache default"
    run "$SIMGRAG examples bootstrap $RUNS/geo12/geo-boot.idx -o $RUNS/geo12/geo-boot.examples.yaml --exclude-entities $RUNS/geo12/geo_topics.txt --llm-cache default"
    run "$PY benchmarks/heldout_eval.py --set geo --llm-cache default --examples $RUNS/geo12/geo-boot.examples.yaml --geo-aliases $RUNS/geo12/geo-boot.idx.aliases.yaml --out $RUNS/geo12/boot"
    run "$SIMGRAG index $RUNS/heldout/wc-b152a9a734f8/kg.txt -o $RUNS/wc12/boot.idx --bootstrap-aliases --overwrite --llm-cache default"
    run "$SIMGRAG examples bootstrap $RUNS/wc12/boot.idx -o $RUNS/wc12/boot.examples.yaml --exclude-entities $RUNS/wc12/topics.txt --llm-cache default"
    run "$PY benchmarks/heldout_eval.py --set geo-wc --llm-cache default --examples $RUNS/wc12/boot.examples.yaml --geo-aliases $RUNS/wc12/boot.idx.aliases.yaml --out $RUNS/wc12/boot"
    note "the topics files (the 'topic' of each evaluation question, one a line) are not written by any script in the repository"
}

area_verify() {
    run "$SIMGRAG bench claims --metaqa-dir $METAQA --n 300 --seed 0 --llm-cache none -o $RUNS/full/claims.jsonl"
    run "$SIMGRAG bench factscore --metaqa-dir $METAQA --hops 1,2,3 --sample 10 --seed 0 --retriever simgrag,none --llm-cache default -o $RUNS/i17/factscore"
}

area_abstention() {
    run "$SIMGRAG bench abstain --metaqa-dir $METAQA --retriever simgrag --hops 1,2,3 --sample 40 --seed 0 --llm-cache default -o $RUNS/i17/abstain"
    run "$SIMGRAG bench calibrate --metaqa-dir $METAQA --hops 1,2,3 --sample 100 -o $RUNS/calib/gold"
    run "$SIMGRAG bench calibrate --metaqa-dir $METAQA --hops 1,2,3 --sample 40 --patterns llm --llm-cache default --add-rows $RUNS/calib/gold/rows.jsonl -o $RUNS/calib/llm40u"
}

train_retrievers() {
    local idx
    idx=$(metaqa_index)
    if [ -z "$idx" ]; then idx="\$HOME/.cache/simgrag/metaqa-minilm-HASH.idx"; note "build the MetaQA index first (the qa area's bench metaqa does)"; fi
    run "$PY benchmarks/train_retrievers.py --metaqa-dir $METAQA --index-dir $idx --out-dir $RUNS/retrievers --max-questions 0 --which gsr --epochs-gsr 3"
    run "$PY benchmarks/train_retrievers.py --metaqa-dir $METAQA --index-dir $idx --out-dir $RUNS/retrievers --max-questions 0 --which subgraphrag --epochs-subgraphrag 2"
}

area_retrievers() {
    train_retrievers
    local models="--retriever-model subgraphrag=$RUNS/retrievers/subgraphrag --retriever-model gsr=$RUNS/retrievers/gsr"
    run "$SIMGRAG bench metaqa --metaqa-dir $METAQA --retriever simgrag,gsr,subgraphrag,kaping,pcst,paths $models --hops 1,2,3 --sample 40 --seed 0 --answer-mode auto --llm-cache default -o $RUNS/i17/compare120_reader"
    run "$SIMGRAG bench metaqa --metaqa-dir $METAQA --retriever simgrag,subgraphrag,gsr,kaping,pcst,paths $models --hops 1,2,3 --sample 300 --seed 0 --answer-mode auto --llm-cache default --no-reader -o $RUNS/i17/compare900_noreader"
}

area_robustness() {
    local models="--retriever-model subgraphrag=$RUNS/retrievers/subgraphrag"
    [ -d "$RUNS/retrievers/subgraphrag" ] || train_retrievers
    run "$SIMGRAG bench metaqa --metaqa-dir $METAQA --retriever simgrag,kaping,subgraphrag $models --hops 1,2,3 --sample 5 --seed 0 --answer-mode auto --llm-cache none --perturb rs:0.1,0.3,0.5 -o $RUNS/robust"
    run "$SIMGRAG bench abstain --metaqa-dir $METAQA --retriever simgrag,kaping,subgraphrag $models --hops 1,2 --sample 10 --seed 0 --llm-cache none -o $RUNS/abstain"
}

area_speed() {
    run "$SIMGRAG bench metaqa --metaqa-dir $METAQA --hops 1,2,3 --sample 300 --seed 0 --answer-mode auto --llm-cache default --no-resume -o $RUNS/full/metaqa_s5_fresh.jsonl"
    run "$PY benchmarks/heldout_eval.py --set geo --per-hop 20 --llm-cache none --out $RUNS/timing13/geo"
    run "$PY benchmarks/heldout_eval.py --set metaqa-reworded --per-hop 20 --metaqa-dir $METAQA --llm-cache none --out $RUNS/timing13/mq"
    run "$PY benchmarks/heldout_eval.py --set metaqa-reworded --per-hop 100 --metaqa-dir $METAQA --out $RUNS/heldout/s11-timing"
    run "$PY benchmarks/heldout_eval.py --set geo-wc --out $RUNS/heldout/s11-timing-wc"
    run "$PY benchmarks/first_answer.py --src src --rounds 3"
    run "$PY benchmarks/first_answer.py --src src --rounds 3 --question 'Name the films whose director also made Titanic'"
    run "$PY benchmarks/first_answer.py --src src --serve --rounds 2"
    run "/usr/bin/time -f '%e s %M KB' $PY -m simgrag.cli index $METAQA/kb.txt -o /tmp/mq-now.idx --relation-aliases src/simgrag/data/aliases/metaqa.yaml -q --overwrite"
    run "/usr/bin/time -f '%e s %M KB' $PY -m simgrag.cli index $METAQA/kb.txt -o /tmp/mq-static.idx --relation-aliases src/simgrag/data/aliases/metaqa.yaml -q --overwrite --embedder static"
    run "$PY benchmarks/embed_floor.py $METAQA/kb.txt --sample 6000"
    run "$PY benchmarks/llama_throughput.py"
    run "$PY benchmarks/prefix_cache.py"
    run "$PY benchmarks/load_serve.py --out $RUNS/full/load_serve.json"
}

area_scale() {
    for n in 2000000 10000000; do
        run "$PY benchmarks/scale.py --entities $n --keep --phase build --index-params '{\"rerank\": \"sq8\"}' --work $RUNS/scale-$n-default"
        run "$PY benchmarks/scale.py --entities $n --keep --phase query --deadline 0.8 --work $RUNS/scale-$n-default"
    done
    run "nice -n 19 env OMP_NUM_THREADS=1 $PY benchmarks/scale.py --entities 100000 --backend milvus"
    run "nice -n 10 $PY benchmarks/entity_linking_embedders.py --out $RUNS/entity_linking.json"
    note "the 1M cold-cache row needs a 12 GB memory cgroup: the commands are in docs/scale.md"
}

area_reliability() {
    local idx=$RUNS/metaqa.idx
    run "$SIMGRAG index $METAQA/kb.txt -o $idx --relation-aliases src/simgrag/data/aliases/metaqa.yaml --overwrite"
    run "$PY benchmarks/fuzz.py --parser 100000 --patterns 100000 --kg-files 20000 --http 20000 --out $RUNS/fuzz.json"
    run "$PY benchmarks/corrupt_index.py --index-dir $idx --out $RUNS/corrupt_index.json"
    run "$PY benchmarks/hostile_retrieve.py --index-dir $idx --out $RUNS/hostile_retrieve.json"
    run "$PY benchmarks/open_index.py --index-dir $idx"
    run "$PY benchmarks/mutation.py"
}

area_sources() {
    run "$PY benchmarks/kg_sources.py --metaqa-dir $METAQA --work /tmp/simgrag-kg-sources"
    run "nice -n 10 $PY benchmarks/update_latency.py metaqa --metaqa-dir $METAQA --work /tmp/bench/metaqa"
    run "nice -n 10 $PY benchmarks/update_latency.py synthetic --entities 1000000 --work /tmp/bench/synth"
}

pattern_stage_kg() {   # KG IDX TEST VAL EX: the four modes of BENCHMARKS.md's "pattern stage per KG" tables
    local kg=$1 idx=$2 test=$3 val=$4 ex=$5 c="--llm-cache $RUNS/llm.sqlite -q"
    run "$SIMGRAG bench qa --index $idx --questions $test --examples $ex --no-grounding -o $RUNS/$kg/nogr.jsonl $c"
    run "$SIMGRAG bench qa --index $idx --questions $test --examples $ex --grounding -o $RUNS/$kg/all.jsonl $c"
    run "$SIMGRAG grounding fit $idx --questions $val --examples $ex $c"
    run "$SIMGRAG bench qa --index $idx --questions $test --examples $ex -o $RUNS/$kg/fitted.jsonl $c"
}

area_pattern_stage() {
    note "WorldCup2014: test = 100 questions per file (seed 0), validation = 40 per file (seed 2) outside test and examples"
    run "$SIMGRAG index $WC/WC2014.txt -o $RUNS/wc.idx --no-learn"
    run "$SIMGRAG bench wc2014-examples --wc-dir $WC --sample 100 --seed 0 -o $RUNS/wc12.yaml"
    run "$PY benchmarks/wc2014_split.py --wc-dir $WC --examples $RUNS/wc12.yaml --test $RUNS/wc_test.jsonl --validation $RUNS/wc_val.jsonl"
    pattern_stage_kg wc "$RUNS/wc.idx" "$RUNS/wc_test.jsonl" "$RUNS/wc_val.jsonl" "$RUNS/wc12.yaml"
    note "geography: the 195 questions split into validation (8 per hop) and test by a scratch script not in the repository"
    run "$SIMGRAG index $RUNS/heldout/geo_kg.txt -o $RUNS/geo.idx --relation-aliases benchmarks/heldout/geo_aliases.yaml"
    pattern_stage_kg geo "$RUNS/geo.idx" "$RUNS/geo_test.jsonl" "$RUNS/geo_val.jsonl" benchmarks/heldout/geo_examples.yaml
    note "genealogy: the generator writes the KG, test and validation questions and the examples file"
    run "$PY benchmarks/genealogy_kg.py --out-dir $RUNS/genealogy --seed 0"
    run "$SIMGRAG index $RUNS/genealogy/genealogy.tsv -o $RUNS/genealogy.idx --no-learn"
    note "then pattern_stage_kg with the files in $RUNS/genealogy (see its README line printed by the generator)"
    note "a new user's KG:"
    run "$PY benchmarks/company_kg.py -o /tmp/meas1/company.tsv --questions /tmp/meas1/questions.jsonl"
    run "time $SIMGRAG index /tmp/meas1/company.tsv -o /tmp/co.idx --overwrite"
    run "time $SIMGRAG ask /tmp/co.idx 'Which department does the leader of Project Falcon work in?'"
    run "$SIMGRAG bench qa --index /tmp/co.idx --questions /tmp/meas1/questions.jsonl -o $RUNS/company/learned.jsonl"
}

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }

[ $# -gt 0 ] || { usage; exit 2; }
selected=()
for arg in "$@"; do
    case $arg in
        --dry-run) DRY=1 ;;
        --list) printf '%s\n' "${AREAS[@]}"; exit 0 ;;
        -h|--help) usage; exit 0 ;;
        all) selected+=("${AREAS[@]}") ;;
        *) if [[ " ${AREAS[*]} " == *" $arg "* ]]; then selected+=("$arg"); else echo "unknown area: $arg (--list)" >&2; exit 2; fi ;;
    esac
done
for area in "${selected[@]}"; do
    note "== $area =="
    "area_${area//-/_}"
done
