#!/usr/bin/env bash
# After the L2 flush became a read (clean lines): noise (two full runs, cold L2), fidelity against
# Nsight Compute in both cache policies (fibtui cold vs ncu --cache-control all; fibtui warm vs
# ncu --cache-control none), and the hostile illegal-address kernel again. Carry .whl (polars stack).
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache
B="python3 scripts/bench/bench_h200.py"
R=$OUT/bench2
mkdir -p $R
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
echo "== noise, L2 cold"; $B noise --ws /tmp/ws --out $R --l2 cold 2>&1 | tee $R/noise_cold.txt
echo "== noise, L2 warm"; $B noise --ws /tmp/ws --out $R --l2 warm 2>&1 | tee $R/noise_warm.txt
RC=$(python3 -c "import json;print(json.load(open('$R/noise_cold.json'))['runs'][0])")
RW=$(python3 -c "import json;print(json.load(open('$R/noise_warm.json'))['runs'][0])")
echo "== fidelity cold"; $B fidelity --ws /tmp/ws --run $RC --cache-control all --out $R 2>&1 | grep -v '^\$' | tee $R/fidelity_all.txt
echo "== fidelity warm"; $B fidelity --ws /tmp/ws --run $RW --cache-control none --out $R 2>&1 | grep -v '^\$' | tee $R/fidelity_none.txt
echo "== hostile"; $B hostile --ws /tmp/ws --out $R 2>&1 | tee $R/hostile.txt
rm -f $R/*.ncu-rep $R/*request.json
tar czf $OUT/bench2.tgz -C $OUT bench2
tar czf $OUT/bench2_runs.tgz -C /tmp/ws optimize_ops
