"""The host view: one call's kernels, busy time, span and launch gaps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fibtui.core.hostview import summarize, summarize_workload


def trace(kernels_per_call: int, kernel_ns: int, gap_ns: int, calls: int = 3) -> dict:
    t = 1_000_000
    out = {
        "uuid": "w",
        "axes": {"batch_size": 1},
        "host_wall_us": [],
        "calls": [],
        "kernels": [],
        "cpu_ops": [],
    }
    for _ in range(calls):
        start = t
        for i in range(kernels_per_call):
            out["kernels"].append({"name": f"k{i}", "start_ns": t, "dur_ns": kernel_ns})
            t += kernel_ns + gap_ns
        out["calls"].append(
            {"name": "fibtui::call", "start_ns": start - 5_000, "dur_ns": t - start + 5_000}
        )
        out["host_wall_us"].append((t - start) / 1e3 + 5)
        t += 50_000
    return out


def test_many_small_kernels_with_long_gaps_are_launch_bound() -> None:
    v = summarize_workload(trace(kernels_per_call=12, kernel_ns=2_000, gap_ns=6_000))
    assert v.kernels_per_call == 12 and v.busy_us == pytest.approx(24.0)
    assert v.gap_us == pytest.approx(66.0) and v.span_us == pytest.approx(90.0)
    assert v.verdict.startswith("launch-bound") and v.host_gaps().gap_share == pytest.approx(
        66 / 90
    )


def test_one_kernel_per_call_points_at_the_kernel() -> None:
    t = trace(kernels_per_call=1, kernel_ns=18_000, gap_ns=0)
    # the profiler puts the call range on the GPU timeline as well, and its own buffer requests
    # on the CPU: neither is the solution's work
    t["kernels"] += [{**c, "name": "fibtui::call"} for c in t["calls"]]
    t["cpu_ops"].append({"name": "Activity Buffer Request", "start_ns": 0, "dur_ns": 100_000})
    v = summarize_workload(t)
    assert not v.top_cpu_ops
    assert v.kernels_per_call == 1 and v.gap_us == 0 and "one kernel per call" in v.verdict
    assert [k.name for k in v.kernels] == ["k0"] and v.kernels[0].mean_us == pytest.approx(18.0)


def test_cpu_only_trace() -> None:
    (v,) = summarize(
        {
            "workloads": [
                {
                    "uuid": "w",
                    "axes": {},
                    "host_wall_us": [10.0],
                    "calls": [],
                    "kernels": [],
                    "cpu_ops": [{"name": "aten::mul", "start_ns": 0, "dur_ns": 3000}],
                }
            ]
        }
    )
    assert "no device kernels" in v.verdict and v.top_cpu_ops[0][0] == "aten::mul"


@pytest.mark.slow
def test_host_view_cli_on_the_interpreter(demo_ws: Path) -> None:
    lines = (
        (demo_ws / "dataset" / "workloads" / "gdn" / "demo_gdn_decode_qk4_v8_d128_k_last.jsonl")
        .read_text()
        .splitlines()
    )
    uuid = json.loads(lines[0])["workload"]["uuid"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fibtui",
            "ncu",
            "host",
            "--workload",
            uuid,
            "--backend",
            "interpreter",
            "--calls",
            "1",
            "--solution",
            str(demo_ws / "candidates" / "torch_eager"),
            "--json",
            "--workspace",
            str(demo_ws),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    (w,) = data["workloads"]
    assert w["uuid"] == uuid and w["calls"] == 1 and w["host_us"] > 0
    assert any(name.startswith("aten::") for name, _ in w["top_cpu_ops"])
