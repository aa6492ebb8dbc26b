#!/usr/bin/env bash
# Issue 20: watch mode on the H200, from a save of the kernel to the paired representative verdict
# in the real TUI (scripts/bench/bench_watch_verdict.py: Textual's run_test, the worker service in a
# private runtime folder), at 120x40 and 80x24; then, unless SPY=0, 4 more saves under py-spy
# (the bench's own process, every thread, idle frames too: where a save's time goes).
#
#   bash scripts/device/h200_watch.sh          # carry .whl (textual, textual-plotext, watchfiles
#                                              # and their wheels) and .probe-whl (py-spy)
# Files: $OUT/watch.tgz (everything) and $OUT/watch_summary.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1 GIT_PYTHON_REFRESH=quiet
source scripts/device/_site.sh
install_site || exit 1
install_spy || exit 1
begin_results watch > /dev/null
for size in 120x40 80x24; do
  timeout -k 10 ${WATCH_S:-150} python3 scripts/bench/bench_watch_verdict.py --saves ${SAVES:-8} \
    --size $size --wait 45 --json $R/watch_$size.json > $R/watch_$size.txt 2>&1
  echo "$size: rc=$? $(tail -1 $R/watch_$size.txt)" | tee -a $R/summary.txt
done
if [ "${SPY:-1}" = 1 ] && [ -x /tmp/spy/bin/py-spy ]; then
  timeout -k 10 120 /tmp/spy/bin/py-spy record --rate 500 --idle --threads --nonblocking --format raw \
    -o $R/watch_spy.stacks -- python3 scripts/bench/bench_watch_verdict.py --saves 4 --wait 45 \
    > $R/watch_spy.txt 2>&1
  echo "under py-spy: rc=$? $(grep -E '^local|^interpreter' $R/watch_spy.txt | tail -1)" | tee -a $R/summary.txt
  python3 scripts/bench/pyspy_breakdown.py $R/watch_spy.stacks --rate 500 > $R/watch_spy_top.txt 2>&1
  gzip -f $R/watch_spy.stacks
fi
cp $R/summary.txt $OUT/watch_summary.txt
tar -czf $OUT/watch.tgz -C $OUT watch && rm -rf $R
