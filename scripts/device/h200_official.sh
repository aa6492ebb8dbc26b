#!/usr/bin/env bash
# Issue 33 on one H200, in one call (under 10 minutes):
#
#   bash scripts/device/h200_official.sh     # carry .whl and .devdata (see below)
#
# 1. The demo's paired full sweep (50 workloads x 3 repeats, solution/triton against
#    candidates/v2_smallb_splitv, fibtui's own timing): its verdict with the three measures (the
#    mean latency with its interval, the projected score, G; the worst workloads).
# 2. The official twin: `fibtui run --timing official --workloads all` of the demo's kernel on the
#    shared 54-workload definition gdn_decode_qk4_v8_d128_k_last (each job also timed as
#    flashinfer-bench main times it: fibtui/worker/official_timing.py).
# 3. flashinfer-bench itself on the same definition and kernel (its persistent runner, its default
#    warm-up 10, iterations 50, trials 3; the workloads split over FB_GROUPS folders so a deadline
#    keeps the folders it finished: flashinfer-bench saves a definition's traces when it ends),
#    stopped when FB_S seconds have gone; its traces imported with `fibtui parity --import --against`
#    the twin's run: per workload flashinfer-bench's latency over the twin's, and their geometric
#    mean (target: within 3%), with the provenance of that flashinfer-bench (version, commit,
#    cupti-python, whether its CUDA-event fallback fired).
# 4. NVML: the cost of one block's clock read (SM and memory clock, power, temperature,
#    slowdowns) and the clock setup (locked or not).
# Files: $OUT/official_summary.txt and $OUT/official.tgz (everything).
#
# Carried (ignored by git): .whl as for scripts/device/h200_definitions.sh, with flashinfer-bench
# built from its main branch (not the 0.1.2 release: 0.1.2 times with CUDA events, not main's
# CUPTI method) and its dependencies: flashinfer-python 0.6.4, cupti-python 13.4.0, apache-tvm-ffi,
# pydantic, pydantic-core, annotated-types, typing-inspection, docstring-parser, pyelftools,
# pyyaml, safetensors (../shared/tools/device-wheels.sh fetches all but flashinfer-bench main,
# and 0.1.2, which must not be carried beside it; build main's wheel from a checkout of its main
# branch: `git archive HEAD | tar -x -C DIR && cd DIR && SETUPTOOLS_SCM_PRETEND_VERSION=0.1.3.dev0+g<commit>
# pip wheel --no-deps --no-build-isolation -w OUT .`, with setuptools and setuptools-scm installed;
# @40e6ca78 gives flashinfer_bench-0.1.3.dev0+g40e6ca78-py3-none-any.whl, 173 kB), plus polars
# (.tar.xz) and fibtui's own runtime wheels as for the other scripts; .devdata/flashinfer-trace: a
# copy of ../shared/datasets/flashinfer-trace.
# Knobs: FB_S (seconds for flashinfer-bench, default 330), FB_GROUPS (3), EVERY (1: every
# workload; 2: every other one), SWEEP=0 skips step 1, NOREF=1 leaves the reference untimed in
# both tools (fibtui's and flashinfer-bench's --no-profile-baseline: the definition's Python
# reference takes 4-150 ms a call, and timing it 180 times a workload is most of both tools' time).
set -uo pipefail
export PYTHONUNBUFFERED=1
source scripts/device/_site.sh
install_site || exit 1
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache-official GIT_PYTHON_REFRESH=quiet
private_runtime official
begin_results official
F="python3 -m fibtui"
python3 - <<'PY' | tee $R/versions.txt
import importlib.metadata as m
for name in ("torch", "triton", "flashinfer-bench", "flashinfer-python", "cupti-python", "nvidia-ml-py"):
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        print(name, "not installed")
PY

if [ "${SWEEP:-1}" = 1 ]; then
  say "demo sweep (fibtui's own timing)"
  demo_paired_sweep || exit 2
fi

WS=/tmp/ws54
shared_sweep_workspace $WS || exit 2
say "official twin: fibtui run --timing official, 54 workloads"
$F run --backend local --workloads all --timing official ${NOREF:+--no-profile-baseline} \
  --workspace $WS --no-daemon --json \
  > $R/twin.json 2> $R/twin.err
say "twin rc=$?"
TWIN=$(python3 -c "import json; print(json.load(open('$R/twin.json'))['run_id'])" 2>/dev/null)
[ -n "$TWIN" ] && cp $WS/optimize_ops/runs/$TWIN/run.json $R/twin.run.json

say "NVML: one block's clock read"
python3 - <<'PY' | tee $R/nvml.txt
import json, time
from fibtui.worker import env
print("block_clock:", env.block_clock(0))
t0 = time.perf_counter()
for _ in range(200):
    env.block_clock(0)
print(f"block_clock: {(time.perf_counter() - t0) / 200 * 1e3:.3f} ms a read (200 reads)")
t0 = time.perf_counter()
for _ in range(200):
    env.sm_clock_now(0)
print(f"sm_clock_now: {(time.perf_counter() - t0) / 200 * 1e3:.3f} ms a read (200 reads)")
print("clock_setup:", json.dumps(env.clock_setup(0)))
PY

say "flashinfer-bench (budget ${FB_S:-330} s, ${FB_GROUPS:-3} groups)"
rm -rf /tmp/fbg* /tmp/fbtraces
python3 scripts/device/fb_groups.py $WS /tmp/fbg ${FB_GROUPS:-3} $WS/solution/triton ${EVERY:-1} \
  > $R/fb_solution.txt || exit 3
python3 -c "from fibtui.runners.parity import bench_facts; import json; print(json.dumps(bench_facts(None, None)))" \
  > $R/fb_facts.json
END=$(( $(date +%s) + ${FB_S:-330} ))
for ((g = 0; g < ${FB_GROUPS:-3}; g++)); do
  LEFT=$(( END - $(date +%s) ))
  [ $LEFT -lt 30 ] && { say "group $g not started: ${LEFT}s left"; break; }
  timeout $LEFT python3 -c 'import sys; from flashinfer_bench.cli.main import cli; sys.argv[0]="flashinfer-bench"; sys.exit(cli())' \
    run --local /tmp/fbg$g --save-results ${NOREF:+--no-profile-baseline} >> $R/fb_console.log 2>&1
  say "flashinfer-bench group $g rc=$?"
done
mkdir -p /tmp/fbtraces/traces
for d in /tmp/fbg*; do
  for t in $(find $d/traces -name '*.jsonl' ! -name '*_workloads.jsonl' 2>/dev/null); do
    cp $t /tmp/fbtraces/traces/$(basename $d)_$(basename $t)
  done
done
cp $R/fb_console.log /tmp/fbtraces/console.log 2>/dev/null
if [ -n "$TWIN" ] && ls /tmp/fbtraces/traces/*.jsonl > /dev/null 2>&1; then
  $F parity --import /tmp/fbtraces --against $TWIN --workspace $WS --json > $R/parity.json 2> $R/parity.err
  say "parity import rc=$?"
  $F parity --import /tmp/fbtraces --against $TWIN --workspace $WS > $R/parity.txt 2>&1
fi
cp -r /tmp/fbtraces $R/fb_traces 2>/dev/null

python3 - $R <<'PY' | tee $OUT/official_summary.txt
import json, math, pathlib, sys
r = pathlib.Path(sys.argv[1])
print((r / "log.txt").read_text())
print((r / "versions.txt").read_text())
if (r / "demo_compare.txt").is_file():
    print("== the demo sweep's verdict (fibtui's own timing)")
    print((r / "demo_compare.txt").read_text()[:3000])
twin = {}
if (r / "twin.run.json").is_file():
    rec = json.loads((r / "twin.run.json").read_text())
    for j in rec["jobs"]:
        off = (j.get("timing") or {}).get("official") or {}
        if j.get("status") == "PASSED" and off.get("latency_ms"):
            twin[j["uuid"]] = (j["axes"], j["latency_ms"], off["latency_ms"], off.get("reference_latency_ms"),
                               j.get("reference_latency_ms"))
    print(f"== official twin: {len(twin)} of {len(rec['jobs'])} jobs with an official-equivalent latency")
    errors = {((j.get('timing') or {}).get('official') or {}).get('error') for j in rec['jobs']} - {None}
    if errors:
        print("official timing errors:", errors)
    clocks = json.loads((r / "twin.json").read_text()).get("clock_notes") if (r / "twin.json").is_file() else None
    print("clock notes:", clocks)
bench, bench_ref = {}, {}
for t in sorted((r / "fb_traces" / "traces").glob("*.jsonl")) if (r / "fb_traces").is_dir() else []:
    for line in t.read_text().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        ev = e.get("evaluation") or {}
        perf = ev.get("performance") or {}
        uuid = (e.get("workload") or {}).get("uuid")
        if ev.get("status") == "PASSED" and perf.get("latency_ms") and uuid:
            bench[uuid] = perf["latency_ms"]
            bench_ref[uuid] = perf.get("reference_latency_ms")
print(f"== flashinfer-bench: {len(bench)} workloads PASSED with a latency")
print("its provenance:", (r / "fb_facts.json").read_text().strip() if (r / "fb_facts.json").is_file() else "?")
both = [u for u in twin if u in bench]
rows = []
print(f"{'workload':10} {'axes':16} {'own us':>8} {'twin us':>8} {'bench us':>9} {'bench/twin':>10} {'twin/own':>9} {'ref b/t':>8}")
for u in sorted(both, key=lambda u: (list(twin[u][0].values()), u)):
    axes, own, tw, tref, _ = twin[u]
    b = bench[u]
    rref = bench_ref[u] / tref if bench_ref.get(u) and tref else None
    rows.append((b / tw, tw / own, rref))
    print(f"{u[:8]:10} {json.dumps(axes):16} {own * 1e3:8.3f} {tw * 1e3:8.3f} {b * 1e3:9.3f} {b / tw:10.3f} {tw / own:9.3f} "
          + (f"{rref:8.3f}" if rref else "       -"))
def gm(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None
if rows:
    g = gm([x[0] for x in rows])
    print(f"geometric mean over {len(rows)} workloads: flashinfer-bench / twin {g:.4f} "
          f"(range {min(x[0] for x in rows):.3f}-{max(x[0] for x in rows):.3f}); "
          f"twin / fibtui's own {gm([x[1] for x in rows]):.4f}; "
          f"reference bench / twin {gm([x[2] for x in rows]) or float('nan'):.4f}")
    print("within 3%:", abs(math.log(g)) <= 0.03)
if (r / "parity.txt").is_file():
    print("== fibtui parity --import (against the twin)")
    print((r / "parity.txt").read_text()[-2500:])
PY
tar -czf $OUT/official.tgz -C $OUT official && rm -rf $R
