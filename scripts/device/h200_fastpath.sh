#!/usr/bin/env bash
# What `fibtui run --workloads rep` costs outside the worker on the H200 (issue 20): before
# RunStarted and from the last job to the verdict, scripts/bench_gate_overhead.py, for the fibtui
# of each tree named in TREES (default: build/base, the commit before the change, made with
# `git archive BASE fibtui | tar -x -C build/base`, then this checkout); plus what nvidia-smi and
# the imports cost on their own there.
#
#   bash scripts/device/h200_fastpath.sh          # carry .whl build/base
#
# Optional: CLI_GATE=1 also runs scripts/bench_cli_gate.py (a real paired gate, with jobs) for
# each tree. Files: $OUT/summary.txt and $OUT/fastpath.tgz (everything).
set -uo pipefail
export PYTHONUNBUFFERED=1
[ -f scripts/bench_gate_overhead.py ] || { echo "this is not the tree with bench_gate_overhead.py"; exit 9; }
if [ ! -f /tmp/site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  for t in .whl/*.tar.xz; do [ -f "$t" ] && { tar -xJf "$t" -C /tmp/site || exit 1; }; done
  touch /tmp/site/.done
fi
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache-fp GIT_PYTHON_REFRESH=quiet
export XDG_RUNTIME_DIR=/tmp/xdg-fp XDG_CACHE_HOME=/tmp/xdg-cache-fp
mkdir -p -m 700 $XDG_RUNTIME_DIR
unset PYTHONDONTWRITEBYTECODE
R=$OUT/fastpath
mkdir -p $R
S=$OUT/summary.txt
{
  echo "== $(date -u)  $(nproc) cores  load $(cat /proc/loadavg)"
  python3 -VV
  env | grep -E '^(PYTHON|CUDA_|XDG_)' | sort
  echo "== nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader, 6 times"
  for i in 1 2 3 4 5 6; do
    /usr/bin/time -f "%e s wall" nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader 2>&1 | tr '\n' ' '
    echo
  done
  echo "== /proc"
  cat /proc/driver/nvidia/version 2>&1 | head -1
  for f in /proc/driver/nvidia/gpus/*/information; do echo "$f"; cat "$f"; done 2>&1
  echo "boot_id $(cat /proc/sys/kernel/random/boot_id 2>&1)"
} > $S 2>&1
# the byte-code caches of /tmp/site (installed with --no-compile) are written by the first imports
python3 -c "import fibtui.cli, fibtui.verbs.run, fibtui.runners.session, fibtui.core.plan, polars, rich.console" 2>/dev/null
python3 -X importtime -c "import fibtui.cli" 2> $R/importtime_cli.txt
for T in ${TREES:-build/base .}; do
  name=$( [ "$T" = "." ] && echo after || echo before )
  echo "== scripts/bench_gate_overhead.py --backend local --reps ${REPS:-9} --tree $T" >> $S
  timeout 300 python3 scripts/bench_gate_overhead.py --backend local \
    --reps ${REPS:-9} --tree $T --profile $R/prof_$name --json $R/overhead_$name.json \
    > $R/overhead_$name.txt 2>&1
  echo "rc=$?" >> $S
  cat $R/overhead_$name.txt >> $S
  if [ "${CLI_GATE:-0}" = 1 ]; then
    echo "== scripts/bench_cli_gate.py --backend local --plain 0 --daemon 3 --at-once 0 (tree $T)" >> $S
    PYTHONPATH=/tmp/site:$T timeout 200 python3 scripts/bench_cli_gate.py --backend local --plain 0 \
      --daemon 3 --at-once 0 --json $R/cli_gate_$name.json -- --baseline solution/triton \
      --solution candidates/v2_smallb_splitv > $R/cli_gate_$name.txt 2>&1
    echo "rc=$?" >> $S
    cat $R/cli_gate_$name.txt >> $S
  fi
done
tar -czf $OUT/fastpath.tgz -C $OUT fastpath
echo "== done $(date -u)" >> $S
