#!/usr/bin/env bash
# Issues 31 and 32 on the H200, in one device call (about 5 minutes), through the worker entry point
# alone (python -m fibtui.worker run: standard library + torch + triton):
#   - a CuTe DSL kernel that needs sm_100a (UNSUPPORTED_HERE with the architectures its own error
#     lists), a CUDA build for sm_100a only (its fat binary read), inline tcgen05 PTX (ptxas), and a
#     CUDA kernel that includes CuTe/CUTLASS headers, built with flashinfer-python's bundled copy;
#   - the hostile candidates that need a GPU (a kept answer, nothing after the first call, work on
#     a side stream joined and hidden, a patched synchronize, a self-restoring profiler patch);
#   - the GDN demo's 50-workload paired sweep with the gate's checks and without, alternated twice
#     (what the checks cost).
# Here, first:
#   .venv/bin/python scripts/device/make_requests.py    # writes .devreq/
#   .whl/ holds apache-tvm-ffi's wheel, cutlass_dsl_4.2.1.tar.xz (the nvidia-cutlass-dsl 4.2.1
#   wheel's files: its wheel is too large to carry beside the tree otherwise) and
#   flashinfer_cutlass_headers.tar.xz (flashinfer-python 0.6.4's __init__.py and bundled CUTLASS)
# Device call: bash scripts/device/h200_gate.sh   (carry: .whl .devreq)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/_site.sh
begin_results h200_gate
install_site || { say "wheels did not install"; exit 1; }
# the DSL wheel's .pth is not read from a --target folder: its package folder goes on the path
export PYTHONPATH=/tmp/site/nvidia_cutlass_dsl/python_packages:$PYTHONPATH
export PYTHONUNBUFFERED=1
python3 - <<'EOF' 2>&1 | tee "$R/versions.txt"
import importlib, torch, triton
print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(), torch.cuda.get_device_capability())
for m in ("cutlass", "tvm_ffi"):
    try:
        mod = importlib.import_module(m); print(m, getattr(mod, "__version__", "?"), mod.__file__)
    except Exception as exc:
        print(m, "not importable:", exc)
from fibtui.core import toolchain
print("cutlass headers:", [h.describe() for h in toolchain.find_cutlass()])
EOF
say "cases"
python3 scripts/device/run_requests.py arch_dsl cutlass_headers arch_build_flag arch_ptx hostile \
  tamper_sync tamper_profiler 2>&1 | tee "$R/cases.txt"
say "sweeps: checks on and off, alternated"
python3 scripts/device/run_requests.py --repeat 3 sweep_on sweep_off 2>&1 | tee "$R/sweeps.txt"
say "done"
mv "$OUT/gate" "$R/events" 2>/dev/null
tar -czf "$OUT/gate.tgz" -C "$OUT" h200_gate && rm -rf "$R/events"
ls -la "$OUT"
