"""A tiny workspace for runner tests: a definition cheap enough for the CPU interpreter, and
solutions that behave well or badly."""

from __future__ import annotations

import json
from pathlib import Path

TINY = "tiny_scale"

TINY_DEFINITION = {
    "name": TINY,
    "op_type": "elementwise",
    "axes": {"n": {"type": "var"}, "m": {"type": "const", "value": 64}},
    "inputs": {
        "x": {"shape": ["n", "m"], "dtype": "float32"},
        "alpha": {"shape": None, "dtype": "float32"},
    },
    "outputs": {"y": {"shape": ["n", "m"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x, alpha):\n    return x * alpha\n",
}

GOOD_TRITON = """import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


def scale(x, alpha, y):
    n = x.numel()
    _scale[(triton.cdiv(n, 256),)](x, y, alpha, n, BLOCK=256)
"""

PY_TEMPLATE = """import os, sys, time


def scale(x, alpha, y):
{body}
"""

BODIES = {
    "good_py": "    y.copy_(x * alpha)",
    "wrong": "    y.copy_(x * alpha * 1.1)",
    "raises": "    raise RuntimeError('planted failure')",
    "exits": "    os._exit(7)",
    "sleeps": "    time.sleep(3600)",
    "noisy": "    print('x' * 2_000_000)\n    sys.stdout.flush()\n    y.copy_(x * alpha)",
    "unwritten": "    pass",
    "syntax": "    return (",
    "slow_py": "    time.sleep(0.25)\n    y.copy_(x * alpha)",
}


def make_tiny_workspace(root: Path, batch_sizes=(1, 2, 3), kernel: str = "good_triton") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.toml").write_text(
        '[solution]\nname = "tiny_v1"\ndefinition = "tiny_scale"\nauthor = "tests"\n\n'
        '[build]\nlanguage = "triton"\nentry_point = "kernel.py::scale"\ndestination_passing_style = true\n'
    )
    src = root / "solution" / "triton"
    src.mkdir(parents=True, exist_ok=True)
    (src / "kernel.py").write_text(
        GOOD_TRITON if kernel == "good_triton" else PY_TEMPLATE.format(body=BODIES[kernel])
    )
    ds = root / "dataset"
    (ds / "definitions").mkdir(parents=True, exist_ok=True)
    (ds / "workloads").mkdir(parents=True, exist_ok=True)
    (ds / "definitions" / f"{TINY}.json").write_text(json.dumps(TINY_DEFINITION))
    lines = []
    for i, n in enumerate(batch_sizes):
        lines.append(
            json.dumps(
                {
                    "definition": TINY,
                    "solution": None,
                    "evaluation": None,
                    "workload": {
                        "uuid": f"wl-{i:03d}-n{n}",
                        "axes": {"n": n},
                        "inputs": {
                            "x": {"type": "random"},
                            "alpha": {"type": "scalar", "value": 1.5},
                        },
                    },
                }
            )
        )
    (ds / "workloads" / f"{TINY}.jsonl").write_text("\n".join(lines) + "\n")
    return root


def make_candidate(root: Path, name: str, kernel: str) -> Path:
    """A folder of sources (kernel.py) usable as --solution / --baseline."""
    folder = root / "candidates" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.py").write_text(
        GOOD_TRITON if kernel == "good_triton" else PY_TEMPLATE.format(body=BODIES[kernel])
    )
    return folder
