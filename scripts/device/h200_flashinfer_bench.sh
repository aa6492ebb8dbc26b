#!/usr/bin/env bash
# flashinfer-bench 0.1.2 on the lent H200, same machine as fibtui's runs:
#  speed: `flashinfer-bench run` (persistent runner, its defaults) on the shared 54-workload
#         definition with the two demo kernels fibtui swept paired (fibtui_v1_bv32, fibtui_v2_smallb_splitv);
# Carry .whl (scripts from ../shared/tools/device-wheels.sh) and .device (datasets made by the lead).
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
FIB=(python3 -c 'import sys; from flashinfer_bench.cli.main import cli; sys.argv[0]="flashinfer-bench"; sys.exit(cli())')
R=$OUT/fib
mkdir -p $R
cp -r .device/fib_shared /tmp/fib_shared
start=$(date +%s.%N)
"${FIB[@]}" run --local /tmp/fib_shared --save-results 2>&1 | while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done > $R/speed_console.log
end=$(date +%s.%N)
python3 -c "print('flashinfer-bench wall_s', round($end - $start, 1))" | tee $R/speed_wall.txt
grep -c "PASSED\|INCORRECT\|ERROR" $R/speed_console.log
tail -3 $R/speed_console.log
tar czf $OUT/fib_speed.tgz -C /tmp/fib_shared traces -C $R .
