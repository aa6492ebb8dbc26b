"""Real Nsight Compute reports of the demo kernel, profiled on the H200 through fibtui's worker
(two variants, batch 1 and 64; tests/fixtures/ncu/h200_demo, made by scripts/device/h200_fibtui.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fibtui.core.ncu import attach_request, diff_reports, load_report, summarize

FIX = Path(__file__).parent / "fixtures" / "ncu" / "h200_demo"


def report(name: str):
    path = FIX / name
    return attach_request(load_report(path), path)


def test_request_beside_the_report_gives_each_launch_its_workload() -> None:
    r = report("demo_v1_b1_b64_details.csv")
    assert [launch.axes for launch in r.launches] == [{"batch_size": 1}, {"batch_size": 64}]
    bands = {s.band: s for s in summarize(r)}
    assert set(bands) == {"batch_size=1", "batch_size=64"}
    assert bands["batch_size=64"].metrics["duration_us"] == pytest.approx(18.43, abs=0.01)
    assert bands["batch_size=1"].classification.grid_too_small  # 32 blocks on 132 SMs


@pytest.mark.parametrize("variant", ["v1", "v2"])
def test_csv_and_text_pages_agree(variant: str) -> None:
    a = {s.band: s.metrics for s in summarize(report(f"demo_{variant}_b1_b64_details.csv"))}
    b = {s.band: s.metrics for s in summarize(report(f"demo_{variant}_b1_b64_details.txt"))}
    for band in a:
        for key in (
            "duration_us",
            "memory_throughput_pct",
            "registers_per_thread",
            "achieved_occupancy_pct",
            "waves_per_sm",
        ):
            assert a[band][key] == pytest.approx(b[band][key]), (band, key)


def test_variant_diff_per_band() -> None:
    diff = diff_reports(report("demo_v1_b1_b64_details.csv"), report("demo_v2_b1_b64_details.csv"))
    pairs = {p.band: p for p in diff.pairs}
    small = {m.metric: m for m in pairs["batch_size=1"].metrics}
    assert small["duration_us"].before == pytest.approx(4.70, abs=0.01)
    assert small["duration_us"].after == pytest.approx(3.81, abs=0.01)
    assert small["grid_blocks"].after == 4 * small["grid_blocks"].before  # BV 32 -> 8
    large = {m.metric: m for m in pairs["batch_size=64"].metrics}
    assert (
        large["grid_blocks"].before == large["grid_blocks"].after == 2048
    )  # same launch at batch 64
