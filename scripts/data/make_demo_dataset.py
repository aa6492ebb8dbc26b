#!/usr/bin/env python3
"""Regenerate the bundled demo's definition and workloads (deterministic: same output every run).

python3 scripts/data/make_demo_dataset.py
"""

import json
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "kernels" / "gdn_decode_demo" / "dataset"
NAME = "demo_gdn_decode_qk4_v8_d128_k_last"

REFERENCE = '''import math
import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    """One gated-delta-rule decode step for every (batch, v-head) at once, in float32."""
    B, T, num_q_heads, K = q.shape
    num_k_heads = k.shape[2]
    num_v_heads, V = v.shape[2], v.shape[3]
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float())).squeeze(1)
    beta = torch.sigmoid(b.float()).squeeze(1)
    q_f = q.squeeze(1).float().repeat_interleave(num_v_heads // num_q_heads, dim=1)
    k_f = k.squeeze(1).float().repeat_interleave(num_v_heads // num_k_heads, dim=1)
    v_f = v.squeeze(1).float()
    if state is None:
        s = torch.zeros(B, num_v_heads, V, K, dtype=torch.float32, device=q.device)
    else:
        s = state.float()
    s = g[:, :, None, None] * s
    old_v = torch.einsum("bhvk,bhk->bhv", s, k_f)
    new_v = beta[:, :, None] * v_f + (1.0 - beta[:, :, None]) * old_v
    s = s + (new_v - old_v)[:, :, :, None] * k_f[:, :, None, :]
    out = scale * torch.einsum("bhvk,bhk->bhv", s, q_f)
    return out.unsqueeze(1).to(torch.bfloat16), s
'''

AXES = {
    "batch_size": {"type": "var", "description": "number of sequences decoded in this step"},
    "seq_len": {"type": "const", "value": 1},
    "num_q_heads": {"type": "const", "value": 4},
    "num_k_heads": {"type": "const", "value": 4},
    "num_v_heads": {"type": "const", "value": 8},
    "head_size": {"type": "const", "value": 128},
}


def t(shape, dtype, **extra):
    return {"shape": shape, "dtype": dtype, **extra}


DEFINITION = {
    "name": NAME,
    "op_type": "gdn",
    "description": "fibtui demo: Gated DeltaNet decode step, GVA q4/k4/v8, head size 128, k-last "
    "fp32 state. A stand-in for the contest's gdn_decode_qk4_v8_d128_k_last with "
    "a vectorized reference.",
    "tags": ["stage:decode", "fibtui:demo", "status:demo"],
    "axes": AXES,
    "constraints": ["num_v_heads % num_q_heads == 0", "num_v_heads % num_k_heads == 0"],
    "inputs": {
        "q": t(["batch_size", "seq_len", "num_q_heads", "head_size"], "bfloat16"),
        "k": t(["batch_size", "seq_len", "num_k_heads", "head_size"], "bfloat16"),
        "v": t(["batch_size", "seq_len", "num_v_heads", "head_size"], "bfloat16"),
        "state": t(
            ["batch_size", "num_v_heads", "head_size", "head_size"], "float32", optional=True
        ),
        "A_log": t(["num_v_heads"], "float32"),
        "a": t(["batch_size", "seq_len", "num_v_heads"], "bfloat16"),
        "dt_bias": t(["num_v_heads"], "float32"),
        "b": t(["batch_size", "seq_len", "num_v_heads"], "bfloat16"),
        "scale": t(None, "float32"),
    },
    "outputs": {
        "output": t(["batch_size", "seq_len", "num_v_heads", "head_size"], "bfloat16"),
        "new_state": t(["batch_size", "num_v_heads", "head_size", "head_size"], "float32"),
    },
    "reference": REFERENCE,
}

#: batch size -> how many workloads (50 in all, from 1 to 64).
BATCHES = {1: 6, 2: 6, 4: 6, 8: 6, 16: 6, 24: 5, 32: 5, 48: 5, 64: 5}


def main() -> None:
    (ROOT / "definitions" / "gdn").mkdir(parents=True, exist_ok=True)
    (ROOT / "workloads" / "gdn").mkdir(parents=True, exist_ok=True)
    (ROOT / "definitions" / "gdn" / f"{NAME}.json").write_text(
        json.dumps(DEFINITION, indent=2) + "\n"
    )
    lines = []
    for batch, count in BATCHES.items():
        for i in range(count):
            wid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"fibtui-demo/{NAME}/{batch}/{i}"))
            inputs = {name: {"type": "random"} for name in DEFINITION["inputs"]}
            inputs["scale"] = {"type": "scalar", "value": 0.08838834764831845}
            lines.append(
                json.dumps(
                    {
                        "definition": NAME,
                        "solution": None,
                        "workload": {"uuid": wid, "axes": {"batch_size": batch}, "inputs": inputs},
                        "evaluation": None,
                    }
                )
            )
    (ROOT / "workloads" / "gdn" / f"{NAME}.jsonl").write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} workloads for {NAME}")


if __name__ == "__main__":
    main()
