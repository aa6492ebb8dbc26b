#!/usr/bin/env bash
# The final H200 pass, on the final code (L2 flushed by reading): the demo round again
# (representative gate + full sweep, 3 repeats, paired), Nsight Compute through `fibtui ncu profile`
# for both variants at batch 1 and 64 and their diff, and fibtui's gate of the 9 representative
# workloads that `fibtui parity` (scripts/device/h200_parity.sh, next call) compares against.
# Carry .whl (polars, rich, platformdirs, tomlkit, gitpython and their needs).
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
R=$OUT/final
mkdir -p $R
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
F="python3 -m fibtui"
$F run --backend local --workloads rep --repeats 3 --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv --workspace /tmp/ws --json > $R/round_gate.json 2> $R/round_gate.txt; tail -3 $R/round_gate.txt
$F run --backend local --workloads all --repeats 3 --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv --workspace /tmp/ws --json > $R/round_full.json 2> $R/round_full.txt; tail -4 $R/round_full.txt
U1=$(python3 -c "import json;r=json.load(open('$R/round_full.json'));print(next(j['uuid'] for j in r['jobs'] if j['axes']['batch_size']==1))")
U64=$(python3 -c "import json;r=json.load(open('$R/round_full.json'));print(next(j['uuid'] for j in r['jobs'] if j['axes']['batch_size']==64))")
$F ncu profile --workload $U1,$U64 --set detailed --kernel gdn --workspace /tmp/ws > $R/ncu_v1.txt 2>&1; tail -2 $R/ncu_v1.txt
$F ncu profile --workload $U1,$U64 --solution /tmp/ws/candidates/v2_smallb_splitv --set detailed --kernel gdn --workspace /tmp/ws > $R/ncu_v2.txt 2>&1; tail -2 $R/ncu_v2.txt
V1=$(ls /tmp/ws/optimize_ops/benchmarks/ncu/*triton_v1*_details.csv | head -1); V2=$(ls /tmp/ws/optimize_ops/benchmarks/ncu/*v2_smallb*_details.csv | head -1)
$F ncu diff $V1 $V2 > $R/ncu_diff.txt 2>&1; head -8 $R/ncu_diff.txt
U=$(python3 -c "import json; s={}; [s.setdefault(o['workload']['axes']['batch_size'], o['workload']['uuid']) for o in map(json.loads, open('/tmp/ws/dataset/workloads/gdn/demo_gdn_decode_qk4_v8_d128_k_last.jsonl'))]; print(','.join(s[k] for k in sorted(s)))")
echo $U > /tmp/parity_workloads
$F run --backend local --workloads $U --workspace /tmp/ws --json > $R/gate.json 2> $R/gate.txt; tail -2 $R/gate.txt
tar czf $OUT/final_ws.tgz -C /tmp/ws optimize_ops
tar czf $OUT/final.tgz -C $OUT final
