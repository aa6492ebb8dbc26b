#!/usr/bin/env bash
# Real contest solutions through fibtui on the H200: for each solution folder of a workspace
# (config.toml's own solution "." and every candidates/NAME), a gate on one workload per batch size
# with cold L2 (the first gate: its build compiles), the same gate with warm L2 (the second gate:
# the build comes from the cache), an independent plain-CUPTI timing of the same workloads
# (scripts/bench/bench_plain_solution.py, warm and cold L2), flashinfer-bench's own build time
# (scripts/bench/bench_fib_build.py) and, in the parity phase, `fibtui parity --solution` (flashinfer-bench
# in the official shape) on the same workloads.
#
#   bash scripts/device/h200_contest.sh gates "SOL1 SOL2 ..."    # . or candidates/NAME
#   bash scripts/device/h200_contest.sh parity "SOL1 SOL2 ..."
#
# Carried (ignored by git): .contest/ws (the workspace: config.toml, solution/, candidates/,
# dataset/), .contest/whl (wheels: flashinfer-bench and its needs, apache-tvm-ffi, rich's
# neighbours), .contest/*.tar.xz (packages too large for a wheel in one call: unpacked into
# /tmp/site). The machine keeps /tmp between calls only while it is warm.
set -uo pipefail
export PYTHONUNBUFFERED=1
PHASE=$1
SOLS=$2
mkdir -p /tmp/site
if ls .contest/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .contest/whl/*.whl || exit 1
fi
for x in .contest/*.tar.xz; do
  [ -f "$x" ] && [ ! -f "/tmp/site/.$(basename $x).done" ] && tar xJf "$x" -C /tmp/site && touch "/tmp/site/.$(basename $x).done"
done
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/python_packages:$PWD
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
python3 -c "import polars, flashinfer_bench, tvm_ffi" || { echo "NOT WARM: the packages of the first call are gone"; exit 3; }
[ -d /tmp/ws ] || { cp -r .contest/ws /tmp/ws && git -C /tmp/ws init -q; }
R=$OUT/contest
mkdir -p $R
F="python3 -m fibtui"
U=$(python3 -c "
import json, glob
seen = {}
for line in open(glob.glob('/tmp/ws/dataset/workloads/**/*.jsonl', recursive=True)[0]):
    w = json.loads(line)['workload']
    seen.setdefault(tuple(sorted(w['axes'].items())), w['uuid'])
print(','.join(seen[k] for k in sorted(seen)))")
echo "$U" > $R/workloads.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
python3 -c "import torch, triton, tvm_ffi; print('torch', torch.__version__, 'triton', triton.__version__, 'tvm_ffi', tvm_ffi.__version__)" >> $R/gpu.txt 2>&1
python3 -c "import cutlass; print('cutlass-dsl', cutlass.__version__)" >> $R/gpu.txt 2>&1
library_of() {  # the shared library fibtui built for a run's solution (from its build cache)
  python3 -c "
import json, glob, sys
rec = json.load(open(sys.argv[1]))
key = rec['jobs'][0]['timing'].get('build', {}).get('cache_key')
if key:
    for m in glob.glob('/tmp/fibtui-cache/builds/*/*_' + key + '/fibtui-build.json'):
        print(m.rsplit('/', 1)[0] + '/' + json.load(open(m))['library'])
" "$1"
}
for S in $SOLS; do
  N=$(basename "$(cd /tmp/ws/$S && pwd)"); [ "$S" = "." ] && N=main
  if [ "$PHASE" = gates ]; then
    t0=$(date +%s%N)
    $F run --backend local --workloads "$U" --solution "/tmp/ws/$S" --workspace /tmp/ws --json > $R/${N}_gate1.json 2> $R/${N}_gate1.txt
    echo "rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $R/${N}_gate1.txt
    t0=$(date +%s%N)
    $F run --backend local --workloads "$U" --solution "/tmp/ws/$S" --l2 warm --workspace /tmp/ws --json > $R/${N}_gate2.json 2> $R/${N}_gate2.txt
    echo "rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $R/${N}_gate2.txt
    LIB=$(library_of $R/${N}_gate1.json)
    for L2 in warm cold; do
      python3 scripts/bench/bench_plain_solution.py --solution /tmp/ws/$S --dataset /tmp/ws/dataset --workloads "$U" \
        ${LIB:+--library "$LIB"} --l2 $L2 > $R/${N}_plain_$L2.jsonl 2> $R/${N}_plain_$L2.err
    done
    python3 scripts/bench/bench_fib_build.py --solution /tmp/ws/$S --dataset /tmp/ws/dataset > $R/${N}_fib_build.json 2>&1
    echo "== $N"; tail -4 $R/${N}_gate1.txt; tail -2 $R/${N}_gate2.txt; head -c 300 $R/${N}_fib_build.json; echo
  else
    $F parity --workspace /tmp/ws --workloads "$U" --solution "/tmp/ws/$S" --json > $R/${N}_parity.json 2> $R/${N}_parity.txt
    echo "== $N parity rc=$?"; tail -3 $R/${N}_parity.txt
  fi
done
if [ "$PHASE" = parity ]; then
  $F check --deep --workspace /tmp/ws --json > $R/check_deep.json 2>&1; echo "check --deep rc=$?"
fi
tar czf $OUT/contest_$PHASE.tgz -C $OUT contest
tar czf $OUT/contest_${PHASE}_runs.tgz -C /tmp/ws optimize_ops
