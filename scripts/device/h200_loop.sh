#!/usr/bin/env bash
# Issue 20 on the H200 in one call: the loop's speed with the worker service and the per-job
# overhead work, and adaptive repeats against the fixed design.
#
#   bash scripts/device/h200_loop.sh           # carry .whl and .devdata (flashinfer-trace)
#
# 1. scripts/bench/bench_cli_gate.py: the demo's paired representative gate (baseline against
#    v2_smallb_splitv) from the CLI: once --no-daemon, twice through the worker service (the
#    second once the service shows its next worker ready), once straight after; wall time from
#    command start to the verdict line, and the verdict's word.
# 2. The shared 54-workload definition, baseline against v2_smallb_splitv, 3 repeats (324 jobs),
#    through the service: cold reference cache, then warm (the sweep target), then adaptive
#    (--adaptive, cap 3); then twice --no-daemon, delimiters through Triton's JIT and launched
#    directly (FIBTUI_DIRECT_DELIMITERS=0 / 1), whose latencies must agree.
# 3. scripts/bench/bench_watch_gpu.py: a save to the paired representative gate's verdict in watch mode.
# 4. scripts/device/h200_adaptive.sh with what is left of ADAPTIVE_S (pairs and designs narrowed
#    by the variables below).
# Files: $OUT/loop.tgz (everything), $OUT/loop_summary.txt, and the adaptive script's own.
set -uo pipefail
export PYTHONUNBUFFERED=1
source scripts/device/_site.sh
install_site || exit 1
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache-loop GIT_PYTHON_REFRESH=quiet
private_runtime loop
begin_results loop

say "1. CLI gate"
timeout 240 python3 scripts/bench/bench_cli_gate.py --backend local --plain 1 --daemon 2 --at-once 1 \
  --json $R/cli_gate.json -- --baseline solution/triton --solution candidates/v2_smallb_splitv \
  > $R/cli_gate.txt 2>&1
say "cli gate rc=$?"; grep -E "^call|waited" $R/cli_gate.txt

say "2. the 54-workload sweep"
WS=/tmp/ws54
shared_sweep_workspace $WS || exit 2
S="run --backend local --workloads all --repeats 3 --baseline $WS/solution/triton --solution $WS/candidates/v2_smallb_splitv --workspace $WS --json"
sweep() {
  local name=$1; shift
  /usr/bin/time -f "%e" -o $R/$name.time python3 -m fibtui "$@" > $R/$name.json 2> $R/$name.err
  say "$name: rc=$? wall $(cat $R/$name.time) s | $(grep -E '^complete|verdict|PROMOTE|REJECT|INCONCLUSIVE' $R/$name.err | tail -2 | tr '\n' ' ' | cut -c1-200)"
}
wait_ready() {
  local t0=$(date +%s.%N)
  for _ in $(seq 1 240); do
    python3 -m fibtui workers status --json 2>/dev/null | python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin).get('ready') else 1)" && break
    sleep 0.25
  done
  say "waited $(python3 -c "import time; print(round(time.time() - $t0, 1))") s for a ready worker"
}
sweep s54_cold $S
wait_ready
sweep s54_warm $S
wait_ready
sweep s54_adaptive $S --adaptive
python3 -m fibtui workers stop > /dev/null
FIBTUI_DIRECT_DELIMITERS=0 sweep s54_jit $S --no-daemon
FIBTUI_DIRECT_DELIMITERS=1 sweep s54_direct $S --no-daemon

say "3. watch mode"
timeout 150 python3 scripts/bench/bench_watch_gpu.py --rounds ${WATCH_ROUNDS:-3} > $R/watch.txt 2>&1
say "watch rc=$?"; grep -v Warning $R/watch.txt | tail -8

python3 - $R <<'PY' | tee $OUT/loop_summary.txt
import json, math, statistics, sys, pathlib
r = pathlib.Path(sys.argv[1])
runs = {}
for name in ["s54_cold", "s54_warm", "s54_adaptive", "s54_jit", "s54_direct"]:
    try:
        d = json.loads((r / f"{name}.json").read_text())
    except Exception as exc:
        print(name, "unreadable:", exc); continue
    runs[name] = d
    jobs = d.get("jobs", [])
    walls = [j["wall_s"] for j in jobs if j.get("wall_s") is not None]
    comp = d.get("comparison") or {}
    print(f"{name}: {(r / f'{name}.time').read_text().strip()} s wall, {d['summary'].get('passed')}/{d['summary'].get('total')} passed,"
          f" job wall_s median {statistics.median(walls) if walls else None}, verdict {comp.get('verdict')} G {comp.get('geomean_ratio')}")
def lat(d):
    out = {}
    for j in d.get("jobs", []):
        if j.get("latency_ms"):
            out.setdefault((j["uuid"], j["role"]), []).append(j["latency_ms"])
    return {k: statistics.median(v) for k, v in out.items()}
if "s54_jit" in runs and "s54_direct" in runs:
    a, b = lat(runs["s54_jit"]), lat(runs["s54_direct"])
    logs = [math.log(b[k] / a[k]) for k in a if k in b]
    if logs:
        print(f"direct / JIT delimiters, per workload and role: {len(logs)} pairs, geomean {math.exp(statistics.mean(logs)):.4f},"
              f" |log| p95 {sorted(abs(x) for x in logs)[int(0.95 * len(logs))]:.4f}")
PY

LEFT=$(( ${ADAPTIVE_S:-560} - ($(date +%s) - START) ))
say "4. adaptive, budget ${LEFT}s"
if [ $LEFT -gt 30 ]; then
  BUDGET_S=$LEFT REAL_PAIRS="${REAL_PAIRS-v2_vs_triton eager_vs_triton}" AA_PAIRS="${AA_PAIRS-triton_aa v2_aa}" \
    FULL_PAIRS="${FULL_PAIRS-}" REP_DESIGNS="${REP_DESIGNS:-fixed3 adaptive10 fixed10}" \
    bash scripts/device/h200_adaptive.sh 2>&1 | tail -25
fi
python3 -m fibtui workers stop > /dev/null 2>&1
say "done"
tar -czf $OUT/loop.tgz -C $OUT loop && rm -rf $R
