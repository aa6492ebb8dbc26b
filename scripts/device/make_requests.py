#!/usr/bin/env python3
"""Build the worker requests that scripts/device/h200_gate.sh runs on the H200 (issues 31 and 32):
each is what ``python -m fibtui.worker run --request FILE`` reads (the entry point the local
runner's workers and Modal's containers run), so the device needs torch and triton only, not
fibtui's CLI stack. Written to ``.devreq/`` (git-ignored; carry it).

    .venv/bin/python scripts/device/make_requests.py      # here, before the device call

Requests (each a JSON file; ``env`` in ``.devreq/cases.json`` says what the worker's environment
adds):

- ``arch_dsl``: the GDN demo's baseline against a CuTe DSL kernel that builds a tcgen05 (UMMA)
  MMA, which the DSL allows on Blackwell only (scripts/device/kernels/dsl_tcgen05);
- ``cutlass_headers``: a CUDA kernel that includes CuTe and CUTLASS headers, built through
  tvm-ffi with the headers of flashinfer-python's wheel;
- ``arch_build_flag``: a plain CUDA kernel built with ``TVM_FFI_CUDA_ARCH_LIST=10.0a`` (its
  library holds sm_100a code only);
- ``arch_ptx``: a CUDA kernel with inline tcgen05 PTX, built for this GPU (ptxas refuses it);
- ``hostile``: hostile candidates on the GPU (cached answers, nothing after the first call, work
  on a side stream), against an honest Triton kernel;
- ``tamper_sync``, ``tamper_profiler``: candidates that patch the timer;
- ``sweep_on``, ``sweep_off``: the GDN demo's 50-workload paired sweep (baseline against
  v2_smallb_splitv), with the gate's checks and without (what the checks cost).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fibtui.core.dataset import Dataset  # noqa: E402
from fibtui.core.plan import solution_from_config  # noqa: E402
from fibtui.core.workspace import load_config  # noqa: E402
from fibtui.runners.session import GPU_PLAN  # noqa: E402
from tests.runner_helpers import GOOD_TRITON, TINY_DEFINITION  # noqa: E402
from tests.test_hostile_candidates import ATTACKS, value_cache  # noqa: E402

OUT = REPO / ".devreq"
KERNELS = REPO / "scripts" / "device" / "kernels"
DEMO = REPO / "kernels" / "gdn_decode_demo"


def config(**extra) -> dict:
    plan = dict(GPU_PLAN, l2_policy="cold", **extra.pop("plan", {}))
    return {
        "backend": "local",
        "device": "cuda:0",
        "correctness_trials": 2,
        "atol": 1e-2,
        "rtol": 1e-2,
        "matched_ratio": 1.0,
        "plan": plan,
        "cache_dir": "/tmp/fibtui-ref",
        "build_cache_dir": "/tmp/fibtui-builds",
        **extra,
    }


def solution(
    sid: str, name: str, language: str, entry: str, sources: dict[str, str], binding=None
) -> dict:
    spec = {"language": language, "entry_point": entry, "destination_passing_style": True}
    if binding:
        spec["binding"] = binding
    return {
        "id": sid,
        "name": name,
        "spec": spec,
        "sources": [{"path": p, "content": c} for p, c in sources.items()],
    }


def from_folder(sid: str, folder: Path) -> dict:
    src = solution_from_config(load_config(folder / "config.toml"))
    return solution(
        sid,
        src.name,
        src.language,
        src.entry_point,
        {s["path"]: s["content"] for s in src.sources},
        src.binding,
    )


def jobs(workloads: list[dict], sids: list[str]) -> list[dict]:
    return [
        {"job_id": f"0|{w['uuid']}", "workload": w, "repeat": 0, "solutions": sids}
        for w in workloads
    ]


def demo_workloads() -> tuple[dict, list[dict]]:
    ds = Dataset(DEMO / "dataset")
    name = ds.definition_names[0]
    wl = ds.workloads(name)
    return ds.definition(name).raw, [wl.get(u).to_json() for u in wl.frame["uuid"].to_list()]


def tiny_workloads(rows: tuple[int, ...]) -> list[dict]:
    return [
        {
            "uuid": f"tiny-n{n}",
            "axes": {"n": n},
            "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 1.5}},
        }
        for n in rows
    ]


CUDA_PLAIN = """#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
using tvm::ffi::TensorView;

__global__ void scale_kernel(const float* x, float* y, float alpha, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * alpha;
}

void scale(TensorView x, double alpha, TensorView y) {
  long n = 1;
  for (int i = 0; i < x.ndim(); ++i) n *= x.size(i);
  scale_kernel<<<(n + 255) / 256, 256>>>(static_cast<const float*>(x.data_ptr()),
                                         static_cast<float*>(y.data_ptr()), (float)alpha, n);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale);
"""

CUDA_CUTE = """#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>
using tvm::ffi::TensorView;

// y = x * alpha, each thread a CuTe tile of 4 elements: a CuTe layout indexes the tile
__global__ void scale_kernel(const float* x, float* y, float alpha, long n) {
  using namespace cute;
  auto tile = make_layout(make_shape(Int<4>{}));
  long base = (blockIdx.x * (long)blockDim.x + threadIdx.x) * size(tile);
  CUTE_UNROLL
  for (int i = 0; i < size(tile); ++i) {
    long j = base + tile(i);
    if (j < n) y[j] = static_cast<float>(cutlass::half_t(1.0f)) * x[j] * alpha;
  }
}

void scale(TensorView x, double alpha, TensorView y) {
  long n = 1;
  for (int i = 0; i < x.ndim(); ++i) n *= x.size(i);
  long threads = (n + 3) / 4;
  scale_kernel<<<(threads + 255) / 256, 256>>>(static_cast<const float*>(x.data_ptr()),
                                               static_cast<float*>(y.data_ptr()), (float)alpha, n);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale);
"""

CUDA_TCGEN05 = CUDA_PLAIN.replace(
    "  if (i < n) y[i] = x[i] * alpha;",
    """  __shared__ unsigned slot;
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;"
                 :: "r"((unsigned)__cvta_generic_to_shared(&slot)));
  }
  if (i < n) y[i] = x[i] * alpha;""",
)

HONEST = GOOD_TRITON.replace("def scale(x, alpha, y):", "def honest(x, alpha, y):")

# the CPU suite's attacks (tests/test_hostile_candidates.py), and those that need a GPU
HOSTILE = {
    name: ATTACKS[name] for name in ("cache_by_address", "cache_by_value", "nothing_after_first")
} | {
    # an answer kept by value where computing costs far more than comparing (a heavy kernel,
    # here the honest one 64 times): the only kind of value cache that would pay
    "cache_by_value_heavy": value_cache("    for _ in range(64):\n        honest(x, alpha, y)\n"),
    # the work on a side stream, joined back: measured into the call
    "side_stream_joined": """
import torch

_side = []


def scale(x, alpha, y):
    if not _side:
        _side.append(torch.cuda.Stream())
    main = torch.cuda.current_stream()
    side = _side[0]
    side.wait_stream(main)
    with torch.cuda.stream(side):
        honest(x, alpha, y)
    main.wait_stream(side)
""",
    # extra work on a side stream, never joined: it runs on past the call's end
    "side_stream_hidden": """
import torch

_side = []


def scale(x, alpha, y):
    if not _side:
        _side.append((torch.cuda.Stream(), torch.empty(1 << 24, device=x.device)))
    side, scratch = _side[0]
    honest(x, alpha, y)
    with torch.cuda.stream(side):
        scratch.mul_(1.0001)
""",
}

TAMPER = {
    "tamper_sync": """
import torch


def scale(x, alpha, y):
    torch.cuda.synchronize = lambda *a, **k: None
    honest(x, alpha, y)
""",
    "tamper_profiler": """
import torch.profiler

_real = torch.profiler.profile.__exit__


def _fake(self, *exc):
    torch.profiler.profile.__exit__ = _real
    return _real(self, *exc)


def scale(x, alpha, y):
    torch.profiler.profile.__exit__ = _fake
    honest(x, alpha, y)
""",
}


def main() -> int:
    OUT.mkdir(exist_ok=True)
    cases: dict[str, dict] = {}
    gdn, gdn_workloads = demo_workloads()
    base = from_folder("baseline-0", DEMO)
    small_and_large = [gdn_workloads[0], gdn_workloads[-1]]

    dsl = (KERNELS / "dsl_tcgen05" / "kernel.py").read_text()
    cases["arch_dsl"] = {
        "config": config(),
        "definition": gdn,
        "solutions": [
            base,
            solution(
                "candidate-0",
                "v3_dsl_tcgen05",
                "python",
                "kernel.py::gdn_decode",
                {"kernel.py": dsl},
            ),
        ],
        "jobs": jobs(small_and_large, ["baseline-0", "candidate-0"]),
    }
    tiny = dict(TINY_DEFINITION)
    tiny_wl = tiny_workloads((64, 4096))
    cases["cutlass_headers"] = {
        "config": config(),
        "definition": tiny,
        "solutions": [
            solution(
                "candidate-0", "cuda_cute", "cuda", "kernel.cu::scale", {"kernel.cu": CUDA_CUTE}
            )
        ],
        "jobs": jobs(tiny_wl, ["candidate-0"]),
    }
    cases["arch_build_flag"] = {
        "config": config(),
        "definition": tiny,
        "solutions": [
            solution(
                "candidate-0",
                "cuda_sm100a_only",
                "cuda",
                "kernel.cu::scale",
                {"kernel.cu": CUDA_PLAIN},
            )
        ],
        "jobs": jobs(tiny_wl[:1], ["candidate-0"]),
        "env": {"TVM_FFI_CUDA_ARCH_LIST": "10.0a"},
    }
    cases["arch_ptx"] = {
        "config": config(),
        "definition": tiny,
        "solutions": [
            solution(
                "candidate-0",
                "cuda_tcgen05_ptx",
                "cuda",
                "kernel.cu::scale",
                {"kernel.cu": CUDA_TCGEN05},
            )
        ],
        "jobs": jobs(tiny_wl[:1], ["candidate-0"]),
    }
    big = tiny_workloads((16384,))
    honest = solution(
        "baseline-0", "honest", "triton", "kernel.py::scale", {"kernel.py": GOOD_TRITON}
    )
    hostile = [
        solution(f"candidate-{i}", name, "triton", "kernel.py::scale", {"kernel.py": HONEST + body})
        for i, (name, body) in enumerate(HOSTILE.items())
    ]
    cases["hostile"] = {
        "config": config(),
        "definition": tiny,
        "solutions": [honest, *hostile],
        "jobs": jobs(big, ["baseline-0", *(s["id"] for s in hostile)]),
    }
    for name, body in TAMPER.items():
        cases[name] = {
            "config": config(),
            "definition": tiny,
            "solutions": [
                honest,
                solution(
                    "candidate-0", name, "triton", "kernel.py::scale", {"kernel.py": HONEST + body}
                ),
            ],
            "jobs": jobs(big, ["baseline-0", "candidate-0"]),
        }
    v2_kernel = (DEMO / "candidates" / "v2_smallb_splitv" / "kernel.py").read_text()
    v2 = solution(
        "candidate-0",
        "v2_smallb_splitv",
        "triton",
        base["spec"]["entry_point"],
        {"kernel.py": v2_kernel},
    )
    for name, checks in (("sweep_on", True), ("sweep_off", False)):
        cases[name] = {
            "config": config(plan={"checks": checks}),
            "definition": gdn,
            "solutions": [base, v2],
            "jobs": jobs(gdn_workloads, ["baseline-0", "candidate-0"]),
        }
    index = {}
    for name, request in cases.items():
        env = request.pop("env", {})
        (OUT / f"{name}.json").write_text(json.dumps(request))
        index[name] = {
            "env": env,
            "jobs": len(request["jobs"]),
            "solutions": [s["name"] for s in request["solutions"]],
        }
    (OUT / "cases.json").write_text(json.dumps(index, indent=1))
    print(f"{len(cases)} requests in {OUT}: {', '.join(cases)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
