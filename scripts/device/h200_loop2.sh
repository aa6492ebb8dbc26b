#!/usr/bin/env bash
# The rest of issue 20's H200 checks after h200_loop.sh, for a short call: watch mode
# (scripts/bench/bench_watch_gpu.py, WATCH_ROUNDS rounds) and more adaptive pairs
# (scripts/device/h200_adaptive.sh with PAIRS narrowed). Carry .whl.
set -uo pipefail
export PYTHONUNBUFFERED=1
source scripts/device/_site.sh
install_site || exit 1
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache-loop2 GIT_PYTHON_REFRESH=quiet
export XDG_RUNTIME_DIR=/tmp/xdg-loop2
mkdir -p -m 700 $XDG_RUNTIME_DIR $OUT/loop2
START=$(date +%s)
timeout ${WATCH_S:-90} python3 scripts/bench/bench_watch_gpu.py --rounds ${WATCH_ROUNDS:-2} > $OUT/loop2/watch.txt 2>&1
echo "watch rc=$? after $(( $(date +%s) - START )) s"; grep -v Warning $OUT/loop2/watch.txt | tail -6
BUDGET_S=$(( ${TOTAL_S:-240} - ($(date +%s) - START) )) REAL_PAIRS="${REAL_PAIRS-eager_vs_triton triton_vs_v2}" \
  AA_PAIRS="${AA_PAIRS-eager_aa v2_best_aa}" FULL_PAIRS="" REP_DESIGNS="${REP_DESIGNS:-fixed3 adaptive10 fixed10}" \
  bash scripts/device/h200_adaptive.sh 2>&1 | tail -22
python3 -m fibtui workers stop > /dev/null 2>&1
tar -czf $OUT/loop2.tgz -C $OUT loop2 && rm -rf $OUT/loop2
