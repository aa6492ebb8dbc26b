#!/usr/bin/env bash
# What `fibtui run --workloads rep` costs outside the worker on the H200 (issue 20), before and
# after a change: scripts/bench/bench_gate_overhead.py (process start to RunStarted; the last job to the
# verdict, replayed) on a fresh demo workspace and on one holding 100 earlier gates, then
# scripts/bench/bench_cli_gate.py (real paired gates through the worker service), for the fibtui of
# BASE (default 4f889d4, the commit before the fast path's caches) and of this checkout, both
# taken from git (`git archive`), so the device's copy of the lead's checkout serves as it is.
#
#   bash scripts/device/h200_fastpath.sh                 # carry .whl
#   BASE=<commit> REPS=9 CLI_GATE=0 bash scripts/device/h200_fastpath.sh
#
# Files: $OUT/summary.txt and $OUT/fastpath.tgz (every output, the cProfile listings included).
set -uo pipefail
export PYTHONUNBUFFERED=1
BASE=${BASE:-4f889d4}
git rev-parse -q --verify "$BASE^{commit}" >/dev/null || { echo "no commit $BASE here"; exit 9; }
source scripts/device/_site.sh
install_site || exit 1
W=/tmp/fastpath
rm -rf $W && mkdir -p $W/before $W/after
git archive "$BASE" fibtui scripts | tar -x -C $W/before
git archive HEAD fibtui scripts | tar -x -C $W/after
# the working tree's own changes (a checkout not committed yet) count as "after"
cp -r fibtui scripts $W/after/ 2>/dev/null
export PYTHONPATH=/tmp/site FIBTUI_CACHE_DIR=/tmp/fibtui-cache-fp GIT_PYTHON_REFRESH=quiet
export XDG_RUNTIME_DIR=/tmp/xdg-fp
mkdir -p -m 700 $XDG_RUNTIME_DIR
unset PYTHONDONTWRITEBYTECODE
R=$OUT/fastpath
mkdir -p $R
S=$OUT/summary.txt
{
  echo "== $(date -u)  $(nproc) cores  load $(cat /proc/loadavg)  base $BASE  head $(git rev-parse --short HEAD)"
  python3 -VV
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "== nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader, 5 times"
  for i in 1 2 3 4 5; do
    /usr/bin/time -f "%e s wall" nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader 2>&1 | tr '\n' ' '
    echo
  done
} > $S 2>&1
cd $W/after
for h in 0 100; do
  for t in before after; do
    echo "== bench_gate_overhead.py --backend local --reps ${REPS:-9} --history $h, fibtui of $t" >> $S
    timeout 300 python3 scripts/bench/bench_gate_overhead.py --backend local --reps ${REPS:-9} \
      --history $h --tree $W/$t --profile $R/prof_${t}_$h --json $R/overhead_${t}_$h.json \
      > $R/overhead_${t}_$h.txt 2>&1
    echo "rc=$?" >> $S
    cat $R/overhead_${t}_$h.txt >> $S
  done
done
if [ "${CLI_GATE:-1}" = 1 ]; then
  for t in before after; do
    echo "== bench_cli_gate.py --backend local --plain 0 --daemon 3 --at-once 0, fibtui of $t (load $(cat /proc/loadavg))" >> $S
    (cd $W/$t && PYTHONPATH=/tmp/site:$W/$t timeout 240 python3 scripts/bench/bench_cli_gate.py \
      --backend local --plain 0 --daemon 3 --at-once 0 --json $R/cli_gate_$t.json -- \
      --baseline solution/triton --solution candidates/v2_smallb_splitv > $R/cli_gate_$t.txt 2>&1)
    echo "rc=$?" >> $S
    cat $R/cli_gate_$t.txt >> $S
  done
fi
tar -czf $OUT/fastpath.tgz -C $OUT fastpath && rm -rf $R
echo "== done $(date -u)" >> $S
tail -n 120 $S
