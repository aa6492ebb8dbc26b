#!/usr/bin/env bash
# Issues 31, 32 and 33 on the H200, the last call of the session (about 6 minutes):
#   1. the GPU hostile candidates and the GDN demo's 50-workload sweep with the gate's checks on
#      and off, alternated twice (scripts/device/run_requests.py over .devreq/);
#   2. the demo's paired full sweep through `fibtui run` (3 repeats): its verdict with the three
#      measures (scripts/device/h200_official.sh's first step);
#   3. the official twin (`fibtui run --timing official`) and flashinfer-bench main on every
#      EVERY-th workload of the shared 54-workload definition (default 6: 9 workloads, flashinfer-
#      bench being slow on the large batches), then `fibtui parity --import --against` the twin;
#   4. flashinfer-bench main judging two spoiled copies of the demo's kernel (an infinity, a NaN in
#      its first output) on two workloads: its INCORRECT_NUMERICAL traces, as it writes them.
# Carry: .whl (as for h200_official.sh: flashinfer-bench main and its dependencies, polars, fibtui's
# CLI wheels), .devdata (the shared dataset), .devreq (make_requests.py's requests).
set -uo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
source scripts/device/_site.sh
install_site || exit 1
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache-end GIT_PYTHON_REFRESH=quiet
private_runtime session_end
begin_results session_end
F="python3 -m fibtui"
FB='import sys; from flashinfer_bench.cli.main import cli; sys.argv[0]="flashinfer-bench"; sys.exit(cli())'

say "1. hostile candidates, sweeps with the checks on and off"
python3 scripts/device/run_requests.py hostile 2>&1 | tee $R/hostile.txt
python3 scripts/device/run_requests.py --repeat 2 sweep_on sweep_off 2>&1 | tee $R/sweeps.txt
mv "$OUT/gate" "$R/gate_events" 2>/dev/null

say "2. the demo sweep through fibtui run"
demo_paired_sweep || exit 2

say "3. official twin and flashinfer-bench on every ${EVERY:-6}th workload"
WS=/tmp/ws54
shared_sweep_workspace $WS || exit 2
UUIDS=$(python3 -c "
import json, pathlib
path = next(pathlib.Path('$WS/dataset/workloads').rglob('gdn_decode_qk4_v8_d128_k_last.jsonl'))
uu = [json.loads(l)['workload']['uuid'] for l in path.read_text().splitlines() if l.strip()]
print(','.join(uu[::${EVERY:-6}]))" 2>/dev/null || true)
[ -z "$UUIDS" ] && UUIDS=all
$F run --backend local --workloads "$UUIDS" --timing official --workspace $WS --no-daemon --json \
  > $R/twin.json 2> $R/twin.err
say "twin rc=$?"
TWIN=$(python3 -c "import json; print(json.load(open('$R/twin.json'))['run_id'])" 2>/dev/null)
[ -n "$TWIN" ] && cp $WS/optimize_ops/runs/$TWIN/run.json $R/twin.run.json
rm -rf /tmp/fbg* /tmp/fbtraces
python3 scripts/device/fb_groups.py $WS /tmp/fbg 1 $WS/solution/triton ${EVERY:-6} > $R/fb_solution.txt || exit 3
timeout ${FB_S:-200} python3 -c "$FB" run --local /tmp/fbg0 --save-results > $R/fb_console.log 2>&1
say "flashinfer-bench rc=$?"
mkdir -p /tmp/fbtraces/traces
for t in $(find /tmp/fbg0/traces -name '*.jsonl' ! -name '*_workloads.jsonl' 2>/dev/null); do
  cp $t /tmp/fbtraces/traces/$(basename $t)
done
cp $R/fb_console.log /tmp/fbtraces/console.log
if [ -n "$TWIN" ] && ls /tmp/fbtraces/traces/*.jsonl > /dev/null 2>&1; then
  $F parity --import /tmp/fbtraces --against $TWIN --workspace $WS > $R/parity.txt 2>&1
  say "parity import rc=$?"
  $F parity --import /tmp/fbtraces --against $TWIN --workspace $WS --json > $R/parity.json 2>> $R/parity.txt
fi
cp -r /tmp/fbtraces $R/fb_traces 2>/dev/null

say "4. flashinfer-bench main on two spoiled kernels"
rm -rf /tmp/fbwrong && python3 scripts/device/fb_wrong.py /tmp/demo /tmp/fbwrong 2 > $R/fb_wrong_solutions.txt
timeout 120 python3 -c "$FB" run --local /tmp/fbwrong --save-results > $R/fb_wrong_console.log 2>&1
say "flashinfer-bench (spoiled) rc=$?"
mkdir -p $R/fb_wrong_traces && cp -r /tmp/fbwrong/traces $R/fb_wrong_traces/ 2>/dev/null
for t in $(find /tmp/fbwrong/traces -name '*.jsonl' 2>/dev/null); do
  echo "== $t"; head -c 1500 $t; echo
  $F results show $t --wide
done > $R/fb_wrong_read.txt 2>&1
say "done"
tar -czf $OUT/session_end.tgz -C $OUT session_end
grep -h "" $R/log.txt
tail -12 $R/hostile.txt; grep "exit" $R/sweeps.txt
head -40 $R/demo_compare.txt
grep -i "geometric\|ratio\|warning" $R/parity.txt | head -12
tail -25 $R/fb_wrong_read.txt
