#!/usr/bin/env bash
# Issue 20: fibtui's paired sweep of the shared 54-workload definition (gdn_decode_qk4_v8_d128_k_last)
# and flashinfer-bench on the same two solutions (the demo's baseline and v2_smallb_splitv), back to
# back on one H200, in one call:
#
#   bash scripts/device/h200_fb_ratio.sh        # carry .whl and .devdata (flashinfer-trace)
#
# 1. scripts/bench/bench_cli_gate.py (the demo's representative gate from the CLI) when CLI_GATE=1.
# 2. fibtui run --workloads all --repeats 3, baseline against v2_smallb_splitv: reference cache
#    cold (its first run: the service starts), warm (the target), adaptive (--adaptive, cap 3).
# 3. The worker service stopped (nothing of fibtui holds the GPU), then flashinfer-bench 0.1.3.dev
#    `run --local DIR --save-results` (its persistent runner and default warm-up, iterations and
#    trials, as the issue's 510 s was measured) on a FlashInfer-Trace folder holding the same
#    definition, the 54 workloads and both solutions packed as `fibtui parity` packs them
#    (scripts/device/fb_pair_dataset.py).
# 4. fibtui's warm sweep once more after it (the worker service starts again first).
# Files: $OUT/fbratio.tgz (everything) and $OUT/fbratio_summary.txt.
#
# flashinfer-bench needs more than one call's 10 minutes for both solutions (2026-12-02: 35 of the
# 54 workloads in 480 s). Split it over two calls, one solution each, and add the two times:
#   SWEEPS=0 FB_S=570 FB_SOLUTIONS=solution/triton bash scripts/device/h200_fb_ratio.sh
#   FB_S=420 FB_SOLUTIONS=candidates/v2_smallb_splitv bash scripts/device/h200_fb_ratio.sh
# (SWEEPS=0 skips fibtui's sweeps; FB=0 skips flashinfer-bench and the sweeps after it;
# FB_SOLUTIONS: folders of the demo workspace, both by default).
set -uo pipefail
export PYTHONUNBUFFERED=1
source scripts/device/_site.sh
install_site || exit 1
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache-fb GIT_PYTHON_REFRESH=quiet
private_runtime fb
begin_results fbratio

if [ "${CLI_GATE:-0}" = 1 ]; then
  say "CLI gate"
  timeout 300 python3 scripts/bench/bench_cli_gate.py --backend local --plain 1 --daemon ${DAEMON:-4} \
    --at-once ${AT_ONCE:-2} --json $R/cli_gate.json -- --baseline solution/triton \
    --solution candidates/v2_smallb_splitv > $R/cli_gate.txt 2>&1
  say "cli gate rc=$?"; grep -E "^call|    python" $R/cli_gate.txt
  python3 -m fibtui workers stop > /dev/null 2>&1
fi

WS=/tmp/ws54
shared_sweep_workspace $WS || exit 2
S="run --backend local --workloads all --repeats 3 --baseline $WS/solution/triton --solution $WS/candidates/v2_smallb_splitv --workspace $WS --json"
sweep() {
  local name=$1; shift
  /usr/bin/time -f "%e" -o $R/$name.time python3 -m fibtui "$@" > $R/$name.json 2> $R/$name.err
  say "$name: rc=$? wall $(cat $R/$name.time) s | $(grep -E 'PROMOTE|REJECT|INCONCLUSIVE|verdict' $R/$name.err | tail -1 | cut -c1-160)"
}
wait_ready() {
  for _ in $(seq 1 240); do
    python3 -m fibtui workers status --json 2>/dev/null | python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin).get('ready') else 1)" && return
    sleep 0.25
  done
}
if [ "${SWEEPS:-1}" = 1 ]; then
  sweep s54_cold $S
  wait_ready
  sweep s54_warm $S
  sweep s54_warm2 $S
  sweep s54_adaptive $S --adaptive
  python3 -m fibtui workers stop > /dev/null 2>&1
fi

if [ "${FB:-1}" = 1 ]; then
say "flashinfer-bench"
FB_DIRS=""
for d in ${FB_SOLUTIONS:-solution/triton candidates/v2_smallb_splitv}; do FB_DIRS="$FB_DIRS $WS/$d"; done
python3 scripts/device/fb_pair_dataset.py $WS /tmp/fbds $FB_DIRS > $R/fb_solutions.txt || exit 3
T0=$(date +%s.%N)
timeout ${FB_S:-480} python3 -c 'import sys; from flashinfer_bench.cli.main import cli; sys.argv[0]="flashinfer-bench"; sys.exit(cli())' \
  run --local /tmp/fbds --save-results > $R/fb_console.log 2>&1
RC=$?
T1=$(date +%s.%N)
python3 -c "print(round($T1 - $T0, 1))" > $R/fb.time
say "flashinfer-bench: rc=$RC wall $(cat $R/fb.time) s"

if [ "${SWEEPS:-1}" = 1 ]; then
  say "fibtui again"
  sweep s54_warm_after $S   # its first worker starts with the service (not ready ahead)
  wait_ready
  sweep s54_warm_after2 $S
fi
fi

python3 - $R /tmp/fbds <<'PY' | tee $OUT/fbratio_summary.txt
import json, pathlib, statistics, sys
r, fbds = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
print((r / "log.txt").read_text())
fib = {}
names = ("s54_cold", "s54_warm", "s54_warm2", "s54_adaptive", "s54_warm_after", "s54_warm_after2")
for name in names:
    if not (r / f"{name}.json").is_file():
        continue
    try:
        d = json.loads((r / f"{name}.json").read_text())
    except Exception as exc:
        print(name, "unreadable", exc); continue
    comp = d.get("comparison") or {}
    jobs = d.get("jobs", [])
    fib[name] = float((r / f"{name}.time").read_text())
    print(f"{name}: wall {fib[name]:.2f} s, {d['summary']['passed']}/{d['summary']['total']} PASSED, "
          f"{len(jobs)} jobs, verdict {comp.get('verdict')} G={comp.get('geomean_ratio')}")
    cache = {}  # the worker's counters run on over a run: its last job's are the run's (per slot)
    for j in jobs:
        t = j.get("timing") or {}
        for k, v in (t.get("reference_cache") or {}).items():
            cache.setdefault(t.get("slot"), {})[k] = max(cache.get(t.get("slot"), {}).get(k, 0), v)
    walls = sorted(j.get("wall_s") or 0 for j in jobs)
    print(f"  reference outputs: {cache}; job wall_s median {walls[len(walls) // 2] * 1000:.1f} ms"
          if walls else "  no jobs")
if not (r / "fb.time").is_file():
    sys.exit(0)
traces = list(fbds.rglob("traces/**/*.jsonl"))
status, lat = {}, {}
for t in traces:
    for line in t.read_text().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        ev = e.get("evaluation") or {}
        sol = e.get("solution")
        status.setdefault(sol, {}).setdefault(ev.get("status"), 0)
        status[sol][ev.get("status")] += 1
        perf = ev.get("performance") or {}
        if perf.get("latency_ms"):
            lat.setdefault(sol, []).append(perf["latency_ms"])
print("flashinfer-bench statuses (traces):", json.dumps(status))
import re
logged = {}
for line in (r / "fb_console.log").read_text(errors="replace").splitlines():
    m = re.search(r"benchmark: Solution '([^']+)' for workload \S+: (\w+)", line)
    if m:
        logged.setdefault(m.group(1), {}).setdefault(m.group(2), 0)
        logged[m.group(1)][m.group(2)] += 1
print("flashinfer-bench statuses (its log):", json.dumps(logged))
status = status or logged
print("flashinfer-bench mean latency (ms):", {k: round(statistics.mean(v), 5) for k, v in lat.items()})
fb = float((r / "fb.time").read_text())
print("flashinfer-bench results:", sum(sum(v.values()) for v in status.values()), "of", 54 * len(
    (r / "fb_solutions.txt").read_text().split()), "in", fb, "s")
for name in ("s54_warm", "s54_warm2", "s54_adaptive", "s54_warm_after2"):
    if name in fib:
        print(f"flashinfer-bench {fb:.1f} s / fibtui {name} {fib[name]:.2f} s = {fb / fib[name]:.0f}x")
PY
cp -r /tmp/fbds/traces $R/fb_traces 2>/dev/null
tar -czf $OUT/fbratio.tgz -C $OUT fbratio && rm -rf $R
