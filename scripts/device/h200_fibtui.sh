#!/usr/bin/env bash
# fibtui on the lent H200 (one call): noise, fidelity vs ncu, the demo round (representative gate,
# full sweep with repeats), ncu reports of two variants at two batch sizes, a hostile kernel,
# and fibtui's paired sweep of the shared 54-workload definition (reference cache cold, then warm).
# Run from the repo root on the device with .whl (polars, rich, platformdirs...) and .device carried.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache
B="python3 scripts/bench/bench_h200.py"
R=$OUT/bench
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $R/gpu.txt
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
echo "== noise"; $B noise --ws /tmp/ws --out $R 2>&1 | tee $R/noise.txt
RUN1=$(python3 -c "import json;print(json.load(open('$R/noise.json'))['runs'][0])")
echo "== fidelity ($RUN1)"; $B fidelity --ws /tmp/ws --run $RUN1 --out $R 2>&1 | tee $R/fidelity.txt
echo "== round: representative gate"; $B sweep --ws /tmp/ws --out $R --name round_gate -- run --backend local --workloads rep --repeats 3 --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv 2>&1 | tee $R/round_gate.txt
echo "== round: full sweep"; $B sweep --ws /tmp/ws --out $R --name round_full -- run --backend local --workloads all --repeats 3 --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv 2>&1 | tee $R/round_full.txt
echo "== ncu reports"
U1=$(python3 -c "import json;r=json.load(open('$R/noise_run1.json'));print(next(j['uuid'] for j in r['jobs'] if j['axes']['batch_size']==1))")
U64=$(python3 -c "import json;r=json.load(open('$R/noise_run1.json'));print(next(j['uuid'] for j in r['jobs'] if j['axes']['batch_size']==64))")
$B profile --ws /tmp/ws --workloads $U1,$U64 --set detailed --out $R/ncu --name demo_v1_b1_b64 2>&1 | tail -3
$B profile --ws /tmp/ws --solution /tmp/ws/candidates/v2_smallb_splitv --workloads $U1,$U64 --set detailed --out $R/ncu --name demo_v2_b1_b64 2>&1 | tail -3
echo "== hostile"; $B hostile --ws /tmp/ws --out $R 2>&1 | tee $R/hostile.txt
echo "== speed: shared 54-workload definition"
rm -rf /tmp/ws54 && cp -r /tmp/ws /tmp/ws54 && rm -rf /tmp/ws54/dataset /tmp/ws54/optimize_ops
sed -i 's/^definition = .*/definition = "gdn_decode_qk4_v8_d128_k_last"/' /tmp/ws54/config.toml
cp -r .device/shared/flashinfer-trace /tmp/ws54/dataset
$B sweep --ws /tmp/ws54 --out $R --name speed_cold --timeout 590 -- run --backend local --workloads all --baseline /tmp/ws54/solution/triton --solution /tmp/ws54/candidates/v2_smallb_splitv 2>&1 | tail -4
$B sweep --ws /tmp/ws54 --out $R --name speed_warm --timeout 590 -- run --backend local --workloads all --baseline /tmp/ws54/solution/triton --solution /tmp/ws54/candidates/v2_smallb_splitv 2>&1 | tail -4
$B sweep --ws /tmp/ws54 --out $R --name parity_fibtui_shared --timeout 590 -- run --backend local --workloads all --solution /tmp/ws54/solution/triton --solution /tmp/ws54/candidates/bad_one_element_off 2>&1 | tail -4
echo "== archive"
tar czf $OUT/demo_optimize_ops.tgz -C /tmp/ws optimize_ops
tar czf $OUT/ws54_optimize_ops.tgz -C /tmp/ws54 optimize_ops
tar czf $OUT/bench.tgz -C $OUT bench
ls -la $R $R/ncu
