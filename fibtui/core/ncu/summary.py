"""The compact table (:func:`summarize`): one :class:`KernelSummary` per kernel name (and band),
the slowest instance's metrics plus the number of instances; the workloads a report was profiled
for (:func:`attach_request`); and the shape matrix (:func:`shape_matrix`): band -> dominant
kernel -> bottleneck -> limiter."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core.ncu.classify import Classification, HostGaps, classify
from fibtui.core.ncu.records import Launch, NcuReport, Rule, launch_fields


def request_path_for(report_file: str | Path) -> Path | None:
    """The worker profile request saved next to a report (``X_request.json`` beside
    ``X.ncu-rep`` / ``X_details.csv`` / ``X_raw.csv`` / ``X_details.txt``), if any."""
    p = Path(report_file)
    stem = p.name
    for suffix in (".ncu-rep", "_details.csv", "_raw.csv", "_details.txt"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    else:
        return None
    candidate = p.with_name(stem + "_request.json")
    return candidate if candidate.is_file() else None


def attach_workloads(report: NcuReport, workloads: Sequence[Mapping[str, Any]]) -> NcuReport:
    """Give each launch its workload and axes. The worker profiles one range per workload in
    request order with the same calls each, so launches split evenly across the workloads."""
    if not workloads or not report.launches or len(report.launches) % len(workloads):
        return report
    per = len(report.launches) // len(workloads)
    for i, launch in enumerate(report.launches):
        w = workloads[i // per]
        launch.workload = str(w.get("uuid")) if w.get("uuid") is not None else None
        axes = w.get("axes")
        launch.axes = dict(axes) if isinstance(axes, Mapping) else {}
    return report


def attach_request(report: NcuReport, report_file: str | Path) -> NcuReport:
    """Attach workloads from the profile request saved beside ``report_file`` (when there is one)."""
    req = request_path_for(report_file)
    if req is None:
        return report
    try:
        data = json.loads(req.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return report
    workloads = data.get("workloads") if isinstance(data, dict) else None
    if isinstance(workloads, list) and all(isinstance(w, Mapping) for w in workloads):
        attach_workloads(report, workloads)
    return report


def band_of(launch: Launch) -> str | None:
    """The band label of a launch: its axes (``batch_size=64``), else its workload, else None."""
    if launch.axes:
        return ",".join(f"{k}={v}" for k, v in launch.axes.items())
    return launch.workload


@dataclass
class KernelSummary:
    name: str
    instances: int
    band: str | None
    workload: str | None
    axes: dict[str, Any]
    launch_id: int | None
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    metrics: dict[str, float | None]
    total_duration_us: float | None
    classification: Classification
    rules: list[Rule] = field(default_factory=list)

    def get(self, key: str) -> float | None:
        return self.metrics.get(key)

    @property
    def bottleneck(self) -> str | None:
        return self.classification.bottleneck

    @property
    def limiter(self) -> str | None:
        return self.classification.limiter

    def to_json(self) -> dict[str, Any]:
        c = self.classification
        return {
            "name": self.name,
            "instances": self.instances,
            "band": self.band,
            "workload": self.workload,
            "axes": self.axes,
            "launch_id": self.launch_id,
            "grid": list(self.grid) if self.grid else None,
            "block": list(self.block) if self.block else None,
            **self.metrics,
            "total_duration_us": self.total_duration_us,
            "bottleneck": c.bottleneck,
            "device_bottleneck": c.device_bottleneck,
            "limiter": c.limiter,
            "grid_too_small": c.grid_too_small,
            "evidence": c.evidence,
            "findings": [f.to_json() for f in c.findings],
            "tactics": c.tactics,
            "rules": [r.to_json() for r in self.rules if r.type in ("OPT", "WRN", "ERR")],
        }


def summarize(
    report: NcuReport | Iterable[Launch], host: HostGaps | None = None
) -> list[KernelSummary]:
    """One row per (band, kernel name): the slowest instance, how many instances, the total."""
    launches = report.launches if isinstance(report, NcuReport) else list(report)
    groups: dict[tuple[str | None, str], list[tuple[Launch, dict[str, float | None]]]] = {}
    for launch in launches:
        groups.setdefault((band_of(launch), launch.kernel), []).append(
            (launch, launch_fields(launch))
        )
    out: list[KernelSummary] = []
    for (band, name), items in groups.items():
        slowest, fields = max(
            items,
            key=lambda it: it[1]["duration_us"] if it[1]["duration_us"] is not None else -math.inf,
        )
        durations = [f["duration_us"] for _, f in items if f["duration_us"] is not None]
        out.append(
            KernelSummary(
                name=name,
                instances=len(items),
                band=band,
                workload=slowest.workload,
                axes=dict(slowest.axes),
                launch_id=slowest.id,
                grid=slowest.grid,
                block=slowest.block,
                metrics=fields,
                total_duration_us=sum(durations) if durations else None,
                classification=classify(fields, host),
                rules=list(slowest.rules),
            )
        )
    return out


def report_to_json(report: NcuReport, summaries: list[KernelSummary]) -> dict[str, Any]:
    return {
        "source": report.path,
        "source_format": report.source_format,
        "launches": len(report.launches),
        "kernels": [s.to_json() for s in summaries],
        "shape_matrix": shape_matrix(summaries),
        "notes": report.notes,
    }


def _weight(s: KernelSummary) -> float:
    for v in (s.total_duration_us, s.get("duration_us")):
        if v is not None:
            return v
    return -math.inf


def shape_matrix(
    bands: Mapping[str, NcuReport | Sequence[KernelSummary]] | Sequence[KernelSummary],
    host: HostGaps | None = None,
) -> list[dict[str, Any]]:
    """Band -> dominant kernel (the most device time: total over its instances) -> bottleneck ->
    limiter, as a list of ``{band, workload, kernel, bottleneck, limiter}``.

    Give either ``{band label: report or summaries}`` or one list of summaries (grouped by their
    own ``band``)."""
    grouped: dict[str | None, list[KernelSummary]] = {}
    if isinstance(bands, Mapping):
        for label, item in bands.items():
            summaries = summarize(item, host) if isinstance(item, NcuReport) else list(item)
            grouped.setdefault(label, []).extend(summaries)
    else:
        for s in bands:
            grouped.setdefault(s.band, []).append(s)
    rows: list[dict[str, Any]] = []
    for band, summaries in grouped.items():
        if not summaries:
            continue
        top = max(summaries, key=_weight)
        rows.append(
            {
                "band": band,
                "workload": top.workload,
                "kernel": top.name,
                "bottleneck": top.bottleneck,
                "limiter": top.limiter,
            }
        )
    return rows
