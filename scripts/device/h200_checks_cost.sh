#!/usr/bin/env bash
# Issue 32's cost of the gate's checks, and issue 33's official twin against flashinfer-bench
# main, on one H200 in one call (about 7 minutes):
#
#   bash scripts/device/h200_checks_cost.sh    # carry .whl .probe-whl .devdata .devreq
#
# 1. The GDN demo's 50-workload paired sweep (baseline against v2_smallb_splitv) through the
#    worker entry point (scripts/device/run_requests.py over make_requests.py's sweep_on and
#    sweep_off), the checks on and off, alternated ROUNDS times (default 2): the worker's own time
#    for the jobs, the process's, and the host time per phase (fibtui.worker.phases).
# 2. One more sweep with the checks on under py-spy (the worker process, 1000 samples a second):
#    where the host time goes, by frame (scripts/bench/pyspy_breakdown.py). SPY=0 skips it.
# 3. The official twin and flashinfer-bench main on the shared 54-workload definition, both with
#    the reference untimed (scripts/device/h200_official.sh with SWEEP=0 NOREF=1; FB_S seconds
#    for flashinfer-bench, default 240). OFFICIAL=0 skips it.
# 4. DEMO=1: the GDN demo's paired full sweep through `fibtui run` (50 workloads x 3 repeats,
#    scripts/device/_site.sh demo_paired_sweep), its verdict and wall time.
# 5. LOOP=1: the CLI gate (scripts/bench/bench_cli_gate.py: --no-daemon once, the worker service 4
#    times, 2 at once) and watch mode in the real TUI at 120x40 and 80x24 (bench_watch_verdict.py,
#    SAVES saves, default 6): issue 36's figures as the code stands.
# Files: $OUT/checks.tgz (everything), $OUT/checks_summary.txt, and with step 3
# $OUT/official_summary.txt and $OUT/official.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
source scripts/device/_site.sh
install_site || exit 1
install_spy || true
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache-checks GIT_PYTHON_REFRESH=quiet
begin_results checks

say "1. sweeps with the checks on and off"
python3 scripts/device/run_requests.py --repeat ${ROUNDS:-2} sweep_on sweep_off 2>&1 | tee $R/sweeps.txt
mv "$OUT/gate" "$R/gate_events" 2>/dev/null
if [ "${SPY:-1}" = 1 ] && [ -x /tmp/spy/bin/py-spy ]; then
  say "2. a sweep with the checks on under py-spy"
  /tmp/spy/bin/py-spy record --subprocesses --rate 1000 --idle --nonblocking --format raw \
    -o $R/sweep_on.stacks -- python3 scripts/device/run_requests.py sweep_on > $R/spy_sweep.txt 2>&1
  say "py-spy rc=$?"
  mv "$OUT/gate" "$R/gate_spy" 2>/dev/null
  python3 scripts/bench/pyspy_breakdown.py $R/sweep_on.stacks --rate 1000 --under run_job --depth 2 \
    --top 40 > $R/spy_run_job.txt 2>&1
  python3 scripts/bench/pyspy_breakdown.py $R/sweep_on.stacks --rate 1000 --under time_cupti --depth 3 \
    --top 40 > $R/spy_time_cupti.txt 2>&1
  gzip -f $R/sweep_on.stacks
fi
if [ "${OFFICIAL:-1}" = 1 ]; then
  say "3. official twin and flashinfer-bench main, the reference untimed"
  SWEEP=0 NOREF=1 FB_S=${FB_S:-240} bash scripts/device/h200_official.sh > $R/official_console.txt 2>&1
  say "official rc=$?"
fi
if [ "${DEMO:-0}" = 1 ]; then
  say "4. the demo's paired full sweep through fibtui run (the user's path)"
  F="python3 -m fibtui"
  private_runtime checks
  ( time demo_paired_sweep ) 2> $R/demo_sweep_time.txt
  tail -3 $R/demo_sweep_time.txt
fi
if [ "${LOOP:-0}" = 1 ]; then
  say "5. the CLI gate (scripts/bench/bench_cli_gate.py) and watch mode (bench_watch_verdict.py)"
  F="python3 -m fibtui"
  private_runtime checks
  timeout 240 python3 scripts/bench/bench_cli_gate.py --backend local --plain 1 --daemon 4 \
    --at-once 2 --json $R/cli_gate.json -- --baseline solution/triton \
    --solution candidates/v2_smallb_splitv > $R/cli_gate.txt 2>&1
  say "cli gate rc=$?"
  $F workers stop > /dev/null 2>&1
  for size in 120x40 80x24; do
    timeout -k 10 150 python3 scripts/bench/bench_watch_verdict.py --saves ${SAVES:-6} \
      --size $size --wait 45 --json $R/watch_$size.json > $R/watch_$size.txt 2>&1
    say "watch $size rc=$? $(tail -1 $R/watch_$size.txt)"
  done
  $F workers stop > /dev/null 2>&1
fi
say "done"
{
  cat $R/log.txt; echo
  grep -E "exit|phases" $R/sweeps.txt
  head -30 $R/spy_time_cupti.txt 2>/dev/null
  grep -E "geometric|within|PASSED with|workloads|errors|clock" $OUT/official_summary.txt 2>/dev/null | head -12
  head -30 $R/demo_compare.txt 2>/dev/null
  grep -E "^call|waited|    python" $R/cli_gate.txt 2>/dev/null
  tail -4 $R/watch_*.txt 2>/dev/null
} > $OUT/checks_summary.txt
# everything in one archive (the device returns a bounded number of files)
tar -czf $OUT/checks.tgz -C $OUT checks && rm -rf $R
cat $OUT/checks_summary.txt
