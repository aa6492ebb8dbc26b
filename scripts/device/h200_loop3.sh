#!/usr/bin/env bash
# Issue 20 on the H200 after workers serve one run after another (the give-back): one call.
#
#   bash scripts/device/h200_loop3.sh          # carry .whl and .probe-whl (py-spy)
#
# 1. scripts/bench/bench_cli_gate.py: the demo's paired representative gate (baseline against
#    v2_smallb_splitv) from the CLI: once --no-daemon, then through the worker service DAEMON
#    times (the first starts it; the later ones are handed the worker the previous call gave
#    back), then AT_ONCE calls straight after the previous one.
# 2. One more such gate under py-spy (the CLI process, and the service's ready worker attached by
#    pid, --nonblocking): where the remaining wall time goes (a profile, not a timing).
# 3. scripts/bench/bench_watch_verdict.py: the real TUI in watch mode, save -> paired verdict.
# 4. scripts/device/h200_adaptive.sh (4 real and 4 A/A pairs over the representatives: fixed 3,
#    adaptive cap 10, fixed 10; FULL_PAIRS over all 50 demo workloads) with what is left of TOTAL_S.
# Files: $OUT/loop3.tgz (everything), $OUT/loop3_summary.txt, the adaptive script's own.
set -uo pipefail
export PYTHONUNBUFFERED=1
source scripts/device/_site.sh
install_site || exit 1
install_spy || exit 1
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache-loop3 GIT_PYTHON_REFRESH=quiet
private_runtime loop3
begin_results loop3

say "1. CLI gate"
timeout 300 python3 scripts/bench/bench_cli_gate.py --backend local --plain 1 --daemon ${DAEMON:-4} \
  --at-once ${AT_ONCE:-2} --json $R/cli_gate.json -- --baseline solution/triton \
  --solution candidates/v2_smallb_splitv > $R/cli_gate.txt 2>&1
say "cli gate rc=$?"; grep -E "^call|waited|    python" $R/cli_gate.txt

if [ -x /tmp/spy/bin/py-spy ]; then
  say "2. a gate under py-spy"
  WS=/tmp/ws-spy
  rm -rf $WS && python3 -m fibtui demo $WS --no-tui > /dev/null
  G="run --backend local --workloads rep --baseline solution/triton --solution candidates/v2_smallb_splitv"
  (cd $WS && python3 -m fibtui $G > /dev/null 2>&1)  # the service's worker serves this workspace once
  sleep 1
  W=$(python3 -m fibtui workers status --json | python3 -c "import json,sys; r=json.load(sys.stdin).get('ready') or [{}]; print(r[0].get('pid', ''))")
  if [ -n "$W" ]; then
    /tmp/spy/bin/py-spy record --pid $W --rate 1000 --idle --nonblocking --format raw -o $R/gate_worker.stacks > $R/spy_worker.log 2>&1 &
    SPY=$!
    sleep 1
  fi
  (cd $WS && /usr/bin/time -f "%e s wall" /tmp/spy/bin/py-spy record --rate 1000 --idle --nonblocking --format raw \
     -o $R/gate_cli.stacks -- python3 -m fibtui $G > $R/gate_spy.txt 2>&1)
  [ -n "${SPY:-}" ] && { kill -INT $SPY; wait $SPY; }
  say "py-spy gate: $(tail -1 $R/gate_spy.txt)"
  for f in $R/gate_cli.stacks $R/gate_worker.stacks; do
    [ -f $f ] && python3 scripts/bench/pyspy_breakdown.py $f --rate 1000 > ${f%.stacks}_top.txt 2>&1
  done
fi

say "3. watch mode in the TUI"
timeout -k 10 ${WATCH_S:-150} python3 scripts/bench/bench_watch_verdict.py --saves ${SAVES:-8} --json $R/watch.json \
  > $R/watch.txt 2>&1
say "watch rc=$?"; tail -3 $R/watch.txt
python3 -m fibtui workers stop > /dev/null 2>&1

say "4. adaptive against fixed"
BUDGET_S=$(( ${TOTAL_S:-520} - ($(date +%s) - START) )) FULL_PAIRS="${FULL_PAIRS-v2_vs_triton triton_aa}" \
  bash scripts/device/h200_adaptive.sh > $R/adaptive_console.txt 2>&1
say "adaptive rc=$?"; tail -40 $R/adaptive_console.txt
python3 -m fibtui workers stop > /dev/null 2>&1
{ cat $R/log.txt; echo; grep -E "^call|    python" $R/cli_gate.txt; tail -2 $R/watch.txt; } > $OUT/loop3_summary.txt
cp $OUT/adaptive/table.txt $R/adaptive_table.txt 2>/dev/null; rm -rf $OUT/adaptive
tar -czf $OUT/loop3.tgz -C $OUT loop3 && rm -rf $R
