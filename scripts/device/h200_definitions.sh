#!/usr/bin/env bash
# The five contest definitions on the H200 (issue 16): a workspace of real-shaped workloads made by
# scripts/data/contest_workloads.py (structured inputs as safetensors), one torch solution of ours per
# definition, judged by fibtui's evaluator for it and by flashinfer-bench (main branch, which has
# the DSA evaluators) on the same workloads.
#
#   bash scripts/device/h200_definitions.sh run    "DEF1 DEF2 ..."   # fibtui run + regimes
#   bash scripts/device/h200_definitions.sh parity "DEF1 DEF2 ..."   # fibtui parity (flashinfer-bench)
#   bash scripts/device/h200_definitions.sh both   "DEF1 DEF2 ..."   # run then parity, per definition
#
# Each fibtui command is stopped with SIGTERM (fibtui's own clean interrupt) after STEP_S seconds
# (default 240; RUN_S and PARITY_S set the run's and the parity's limits apart; WORKLOADS=UUID,...
# narrows what parity runs), so one slow definition cannot take the whole call. The files come back
# as one archive, $OUT/defs_<phase>[_<TAG>].tar.gz (a device call returns 8 files at most), beside
# summary_<phase>[_<TAG>].txt; TAG tells apart several invocations in one call.
#
# Carried (ignored by git): .whl (polars 1.20 as an unpacked .tar.xz, pyyaml, safetensors, platformdirs, tomlkit, gitpython, pydantic, apache-tvm-ffi,
# cupti-python, flashinfer-python 0.6.4 and flashinfer-bench built from its main branch @40e6ca78),
# .devdata (the five definitions). The workspace is made in /tmp/defs (kept while the machine is warm).
set -uo pipefail
export PYTHONUNBUFFERED=1
PHASE=$1
DEFS=$2
if [ ! -f /tmp/site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  # packages whose wheel is too large for one call's 64 MiB travel as an unpacked tree, xz-compressed
  for t in .whl/*.tar.xz; do [ -f "$t" ] && { tar -xJf "$t" -C /tmp/site || exit 1; }; done
  touch /tmp/site/.done
fi
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
python3 -c "import torch, polars, flashinfer_bench, importlib.metadata as m; print('torch', torch.__version__, torch.cuda.get_device_name(), 'flashinfer-bench', m.version('flashinfer-bench'))" || exit 3
WS=/tmp/defs
if [ ! -d $WS ]; then
  python3 scripts/data/contest_workloads.py --definitions .devdata --out $WS || exit 4
  git -C $WS init -q && git -C $WS add -A && git -C $WS -c user.email=d@d -c user.name=d commit -qm ws
fi
R=$OUT/defs
mkdir -p $R
F="python3 -m fibtui"
STEP_S=${STEP_S:-240}
TR="timeout -s TERM -k 30 ${RUN_S:-$STEP_S}"
TP="timeout -s TERM -k 30 ${PARITY_S:-$STEP_S}"
SUFFIX=$PHASE${TAG:+_$TAG}
for D in $DEFS; do
  if [ "$PHASE" = run ] || [ "$PHASE" = both ]; then
    echo "=== run $D $(date +%T)"
    /usr/bin/time -f "%e s wall" $TR $F run --backend local --workloads all --definition $D --workspace $WS --json \
      > $R/${D}_run.json 2> $R/${D}_run.err
    echo "rc=$?"; tail -3 $R/${D}_run.err
    RUN=$(python3 -c "import json,sys; print(json.load(open('$R/${D}_run.json'))['run_id'])" 2>/dev/null)
    [ -n "$RUN" ] && cp $WS/optimize_ops/runs/$RUN/journal.jsonl $R/${D}_journal.jsonl
    [ -n "$RUN" ] && $F regimes --definition $D --workspace $WS --results $WS/optimize_ops/runs/$RUN/run.json --json \
      > $R/${D}_regimes.json 2> $R/${D}_regimes.err
    [ -n "$RUN" ] && COLUMNS=120 $F regimes --definition $D --workspace $WS --results $WS/optimize_ops/runs/$RUN/run.json \
      > $R/${D}_regimes.txt 2>&1
  fi
  if [ "$PHASE" = parity ] || [ "$PHASE" = both ]; then
    echo "=== parity $D $(date +%T)"
    /usr/bin/time -f "%e s wall" $TP $F parity --workloads ${WORKLOADS:-all} --definition $D --workspace $WS --json \
      > $R/${D}_parity.json 2> $R/${D}_parity.err
    echo "rc=$?"; tail -3 $R/${D}_parity.err
    P=$(ls -d $WS/optimize_ops/parity/*/ 2>/dev/null | tail -1)
    [ -n "$P" ] && cp $P/console.log $R/${D}_parity_console.log 2>/dev/null
  fi
done
cp $WS/dataset/workloads/*/*.jsonl $R/ 2>/dev/null
python3 - "$R" "$PHASE" <<'PY' | tee $OUT/summary_$SUFFIX.txt
import json, sys, pathlib
r = pathlib.Path(sys.argv[1])
phases = ["run", "parity"] if sys.argv[2] == "both" else [sys.argv[2]]
for p in sorted(q for ph in phases for q in r.glob(f"*_{ph}.json")):
    try:
        d = json.loads(p.read_text())
    except Exception as exc:
        print(p.name, "unreadable", exc); continue
    if p.name.endswith("_run.json"):
        jobs = d.get("jobs", [])
        print(p.name, d["summary"]["passed"], "/", d["summary"]["total"], "PASSED",
              sorted({j.get("correctness", {}).get("evaluator") for j in jobs} - {None}),
              [(j["axes"], j["status"], round(j["latency_ms"] * 1000, 1) if j.get("latency_ms") else None) for j in jobs][:10])
    else:
        c = (d.get("comparisons") or [{}])[0]
        print(p.name, "bench", d.get("passed"), "/", d.get("total"), "evaluator", d.get("bench_evaluator"), "vs", d.get("evaluator"),
              "mismatches", c.get("verdict_mismatches"), "warnings", d.get("warnings"))
PY
tar -czf $OUT/defs_$SUFFIX.tar.gz -C $OUT defs && rm -rf $R
