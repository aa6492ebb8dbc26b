#!/usr/bin/env bash
# A short recheck on the H200 after the worker clean-up change (engine build folders, worker
# scratch folders): a paired representative gate, `fibtui ncu profile` and `fibtui ncu host` on the
# demo, then a count of fibtui-worker-* folders left in the temp folder (expected: none), and a
# runner SIGKILLed mid-sweep (its workers must exit and remove their scratch folders).
# Carry .whl.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
export TMPDIR=/tmp/recheck-tmp
rm -rf $TMPDIR && mkdir -p $TMPDIR
R=$OUT/recheck
mkdir -p $R
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
F="python3 -m fibtui"
$F run --backend local --workloads rep --repeats 3 --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv --workspace /tmp/ws --json > $R/gate.json 2> $R/gate.txt; tail -3 $R/gate.txt
echo "left in TMPDIR after the gate: $(ls $TMPDIR | grep -c fibtui-worker)"
$F ncu profile --workload a8efeb8a --set basic --kernel gdn --workspace /tmp/ws > $R/ncu.txt 2>&1; tail -2 $R/ncu.txt
echo "left in TMPDIR after ncu profile: $(ls $TMPDIR | grep -c fibtui-worker)"
$F ncu host --workload a8efeb8a,200a3ebd --calls 20 --workspace /tmp/ws > $R/host.txt 2>&1; tail -4 $R/host.txt
echo "left in TMPDIR after ncu host: $(ls $TMPDIR | grep -c fibtui-worker)"
setsid $F run --backend local --workloads all --repeats 3 --workspace /tmp/ws > $R/killed.txt 2>&1 &
PID=$!
sleep 12
echo "scratch folders while the sweep runs: $(ls $TMPDIR | grep -c fibtui-worker-cwd)"
kill -9 -- -$PID 2>/dev/null || kill -9 $PID
sleep 3
echo "left in TMPDIR 3 s after SIGKILL of the runner: $(ls $TMPDIR | grep -c fibtui-worker)"
echo "workers still running: $(pgrep -fc 'fibtui.worker serve')"
$F runs list --workspace /tmp/ws 2>&1 | tail -3
tar czf $OUT/recheck.tgz -C $OUT recheck
