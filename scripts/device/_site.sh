# Sourced by the scripts/device/*.sh: what several of them do alike. install_site puts .whl/*.whl
# (and the .tar.xz of wheels too large for pip's zip reader, polars) into /tmp/site once per
# machine (again when the names of the wheels carried changed) and puts /tmp/site and the tree
# first on PYTHONPATH; install_spy puts py-spy (.probe-whl) into /tmp/spy. Without wheels (the CPU
# check) nothing is installed.
install_site() {
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
  ls .whl/*.whl > /dev/null 2>&1 || return 0
  local have; have=$(ls .whl | md5sum)
  if [ "$(cat /tmp/site/.done 2>/dev/null)" != "$have" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
    for t in .whl/*.tar.xz; do [ -f "$t" ] && { tar -xJf "$t" -C /tmp/site || return 1; }; done
    echo "$have" > /tmp/site/.done
  fi
}
install_spy() {
  [ -d .probe-whl ] || return 0
  [ -x /tmp/spy/bin/py-spy ] && return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/spy .probe-whl/*.whl
}

# A copy of the demo workspace on the shared 54-workload definition (gdn_decode_qk4_v8_d128_k_last,
# carried as .devdata/flashinfer-trace): the sweeps of issue 20 run there.
shared_sweep_workspace() {
  local ws=$1
  rm -rf "$ws" && python3 -m fibtui demo "$ws" --no-tui --no-history > /dev/null || return 2
  rm -rf "$ws/dataset" "$ws/optimize_ops" && cp -r .devdata/flashinfer-trace "$ws/dataset" || return 2
  sed -i 's/^definition = .*/definition = "gdn_decode_qk4_v8_d128_k_last"/' "$ws/config.toml"
}

# begin_results NAME: R=$OUT/NAME made, START set, the GPU's clocks in $R/gpu.txt (also printed)
# and the tree's commit and changed files in $R/commit.txt. say prints a line with the seconds
# since begin_results and keeps it in $R/log.txt. private_runtime NAME: an owner-only
# XDG_RUNTIME_DIR of its own (the worker service's socket folder) for the script.
begin_results() {
  R=$OUT/$1
  mkdir -p "$R"
  START=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$R/gpu.txt"
  { git rev-parse HEAD; git status --short; } > "$R/commit.txt" 2>/dev/null
}
say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$R/log.txt"; }
private_runtime() {
  export XDG_RUNTIME_DIR=/tmp/xdg-$1
  mkdir -p -m 700 "$XDG_RUNTIME_DIR"
}

# demo_paired_sweep: the GDN demo's paired full sweep through `fibtui run` (3 repeats, baseline
# against v2_smallb_splitv, the demo copied to /tmp/demo), its record and `fibtui compare` into
# $R (demo_sweep.json/.err/.run.json, demo_compare.txt); F is the fibtui command.
demo_paired_sweep() {
  rm -rf /tmp/demo && $F demo /tmp/demo --no-tui --no-history > /dev/null || return 2
  $F run --backend local --workloads all --repeats 3 --baseline /tmp/demo/solution/triton \
    --solution /tmp/demo/candidates/v2_smallb_splitv --workspace /tmp/demo --json \
    > $R/demo_sweep.json 2> $R/demo_sweep.err
  say "demo sweep rc=$?"
  local run
  run=$(python3 -c "import json; print(json.load(open('$R/demo_sweep.json'))['run_id'])" 2>/dev/null)
  [ -n "$run" ] && $F compare $run --workspace /tmp/demo > $R/demo_compare.txt 2>&1
  [ -n "$run" ] && cp /tmp/demo/optimize_ops/runs/$run/run.json $R/demo_sweep.run.json
  $F workers stop --workspace /tmp/demo > /dev/null 2>&1
  return 0
}
