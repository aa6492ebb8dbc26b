"""``fibtui regimes``: bands of the real workloads, latency shares, outliers, representatives,
roofline floors.

    fibtui regimes [--definition NAME] [--results FILE] [--solution NAME] [--device NAME]
                   [--pin UUID] [--unpin UUID] [--auto UUID] [--json]

``--definition`` defaults to the active solution's definition. ``--results`` is any result file
``fibtui results show`` reads (flashinfer-bench traces, retained_run.json / .log, the runners'
benchmark_detailed_results.json...); when it holds several solutions, ``--solution`` picks one.
Without ``--results`` the latency comes from :func:`latest_results` (fibtui's own run records;
not wired yet, so counts only). Per workload, the latency is the mean of its PASSED runs.
``--device`` names the device of the floors (B200, H200, H100, or one defined in fibtui.toml);
default: the results' hardware when known, else B200 (the contest's). ``--pin`` / ``--unpin``
store a representative choice in the workspace's fibtui.toml (``[regimes] pinned / unpinned``; ``--auto`` drops it)
before the analysis; both may repeat.

``--json`` prints one object:

- ``definition`` (name), ``op_type``, ``workload_count``;
- ``mode``: ``"latency"`` or ``"counts-only"`` (then every latency field and ``latency_share``
  is null); ``latency_source`` (the file and solution, or ``none: counts only``);
  ``total_latency_ms`` (sum over workloads of their mean latency);
- ``varying_axes``: list of axis names that take more than one value; ``const_axes``: name ->
  value (the definition's constants plus variable axes that never vary); ``dominant_axis``; and
  ``binning``: axis -> ``values`` / ``log2`` / ``quantile``;
- ``device``: name, bandwidth_tbs, bf16/fp8/fp4 TFLOP/s, sms, source (``spec`` or
  ``fibtui.toml``), note, chosen_by;
- ``bands``: each ``name``, ``filter`` (axis -> value, or ``[lo, hi]`` inclusive; for a merged
  band its bounding box, with the exact combinations in ``members``), ``kind`` (value, range,
  combo, merged, outlier, all), ``workloads``, ``passed`` (workloads whose every run PASSED; null
  without results), ``with_latency``, ``total_latency_ms``, ``mean_latency_ms``,
  ``latency_share`` (null without latency; the shares sum to 1), ``workload_share``,
  ``mean_floor_us``, ``mean_speed_of_light_pct`` (the mean over its workloads), ``outlier``;
- ``outliers``: band names (a band with about a third of the latency) and workload uuids (a
  single workload with about a third of it; it also gets a band ``outlier <uuid>``), and
  ``outlier_details`` (kind, name/uuid, latency_share);
- ``representatives``: each ``uuid``, ``band``, ``reason``, ``axes``, ``pinned``, ``latency_ms``;
  ``target_representatives`` ([2, 3] above 40 workloads, else [3, 4]); ``pinned``, ``unpinned``;
- ``shape_matrix``: per band ``band``, ``uuid``, ``dominant_kernel``, ``bottleneck``,
  ``limiter``, ``source`` (the kernel columns are null until NCU evidence is attached);
- ``workloads``: each ``uuid``, ``axes`` (varying axes), ``band``, ``runs``, ``passed``,
  ``latency_ms``, ``floor_bytes``, ``floor_flops``, ``floor_us``, ``floor_bound`` (memory or
  compute), ``speed_of_light_pct`` (100 * floor / latency: 100 = at the floor, 25 = 4x the
  floor; above 100 the latency or the floor is wrong);
- ``speed_of_light_convention`` (that sentence), ``notes``.

These keys replaced ``pct_of_floor``, ``mean_pct_of_floor`` and ``pct_of_floor_convention``
(the inverse ratio, 100 * latency / floor), which the JSON no longer carries.

Exit codes: 0 ok; 2 bad input (an unreadable --results file, an unknown --definition,
--solution or --device, a broken fibtui.toml).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fibtui.core.dataset import Dataset
    from fibtui.core.regimes import RegimeReport
    from fibtui.core.results.table import ResultRow
    from fibtui.core.workspace import Workspace
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser(
        "regimes", help="bands of the real workloads, latency shares, representatives, floors"
    )
    common(p)
    p.add_argument(
        "--definition", metavar="NAME", help="definition (default: the active solution's)"
    )
    p.add_argument(
        "--results",
        metavar="FILE",
        help="a result file (traces JSONL, retained_run.json/.log, ...)",
    )
    p.add_argument(
        "--solution", metavar="NAME", help="the solution to read from a multi-solution result file"
    )
    p.add_argument(
        "--device",
        metavar="NAME",
        help="device of the floors: B200, H200, H100 or one in fibtui.toml",
    )
    p.add_argument(
        "--pin",
        metavar="UUID",
        action="append",
        default=[],
        help="pin a representative (stored in fibtui.toml)",
    )
    p.add_argument(
        "--unpin",
        metavar="UUID",
        action="append",
        default=[],
        help="unpin / exclude a representative",
    )
    p.add_argument(
        "--auto",
        metavar="UUID",
        action="append",
        default=[],
        help="give a pinned or excluded workload back to the automatic choice",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON (keys: see the module docstring)",
    )
    p.set_defaults(func=regimes_verb)


def latest_results(
    workspace: Workspace, definition: str
) -> tuple[list[ResultRow], str, str | None] | None:
    """The latest GPU-timed result rows of ``definition`` from fibtui's own run records in
    ``workspace``, as ``(rows, label, hardware)``, or None (then ``fibtui regimes`` reports counts
    only)."""
    from fibtui.core.runs import latest_rows

    try:
        count = len(workspace.dataset().workloads(definition))
    except Exception:  # noqa: BLE001 - the coverage preference is only a preference
        count = None
    return latest_rows(workspace.archive_root, definition, workloads=count)


def _rows_from_file(
    args: argparse.Namespace, definition: str, ds: Dataset
) -> tuple[list[Any], str, str | None]:
    from fibtui.core.errors import InputError
    from fibtui.core.results import load_results

    path = args.results
    workloads = ds.workloads(definition)

    def lookup(def_name: str, uuid: str) -> dict[str, int] | None:
        return workloads.axes_of(uuid) if uuid in workloads else None

    table = load_results(path, axes_lookup=lookup)
    if not table.rows:
        raise InputError(path, f"holds no per-workload result rows ({table.source_format})")
    solutions = [s for s in table.solutions]
    if args.solution is not None:
        if args.solution not in solutions:
            raise InputError(
                path,
                f"no rows for solution {args.solution!r}; solutions here: {', '.join(s or '(unnamed)' for s in solutions)}",
                field="--solution",
            )
        rows = table.for_solution(args.solution)
    elif len(solutions) > 1:
        raise InputError(
            path,
            f"holds {len(solutions)} solutions ({', '.join(s or '(unnamed)' for s in solutions)}); pick one with --solution",
            field="--solution",
        )
    else:
        rows = list(table.rows)
    n_rows = len(rows)
    rows = [r for r in rows if not r.definition or r.definition == definition]
    if not any(r.uuid in workloads for r in rows):
        raise InputError(
            path,
            f"none of its {n_rows} result rows names one of the {len(workloads)} workloads of {definition} "
            f"in {workloads.path} (results from another copy of the dataset?)",
            field="--results",
        )
    hardware = None
    env = table.meta.get("environment")
    if isinstance(env, dict) and isinstance(env.get("hardware"), str):
        hardware = env["hardware"]
    solution = args.solution or (solutions[0] if solutions and solutions[0] else None)
    label = f"{path} ({table.source_format}" + (f", solution {solution}" if solution else "") + ")"
    return rows, label, hardware


def regimes_verb(args: argparse.Namespace) -> int:
    from fibtui.core import regimes, roofline
    from fibtui.verbs._common import emit_json, workspace_from

    ws = workspace_from(args)
    assert ws is not None
    ds = ws.dataset()
    name = args.definition or ws.config_for(None).definition
    definition = ds.definition(name)
    workloads = ds.workloads(name)
    # Every input is checked before fibtui.toml is touched.
    explicit_device = roofline.get_device(args.device, ws.root) if args.device else None
    rows = None
    label = None
    hardware = None
    if args.results:
        rows, label, hardware = _rows_from_file(args, name, ds)
    elif args.solution:
        from fibtui.core.errors import UsageError

        raise UsageError("--solution needs --results FILE")
    else:
        latest = latest_results(ws, name)
        if latest is not None:
            rows, label, hardware = latest
    for uuid in args.pin:
        if uuid not in workloads:
            from fibtui.core.errors import InputError

            raise InputError(None, f"{uuid!r} is not a workload of {name}", field="--pin")
    for uuid in args.unpin:
        regimes.unpin(ws.root, uuid)
    for uuid in args.auto:
        regimes.automatic(ws.root, uuid)
    for uuid in args.pin:
        regimes.pin(ws.root, uuid)
    pinned, unpinned = regimes.load_pins(ws.root)

    if explicit_device is not None:
        device, chosen = explicit_device, "--device"
    elif hardware and roofline.device_key(hardware) in roofline.device_names(ws.root):
        device, chosen = (
            roofline.get_device(hardware, ws.root),
            f"the results' hardware ({hardware})",
        )
    else:
        device, chosen = (
            roofline.get_device("B200", ws.root),
            "default (B200, the contest's device)",
        )
    report = regimes.analyze(
        definition,
        workloads,
        rows,
        pinned=pinned,
        unpinned=unpinned,
        device=device,
        latency_source=label,
    )
    if report.device is not None:
        report.device["chosen_by"] = chosen
    if args.json:
        emit_json(report.to_json())
        return 0
    _print_report(report)
    return 0


# --------------------------------------------------------------------------------------------
# Human output
# --------------------------------------------------------------------------------------------


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1000:.2f}"


def _print_report(report: RegimeReport) -> None:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.core.roofline import format_speed_of_light
    from fibtui.verbs._common import console

    con = console()
    con.print(
        f"[bold]{escape(report.definition)}[/]  {escape(report.op_type)}  "
        f"{report.workload_count} workloads"
    )
    if report.has_latency:
        con.print(
            f"latency: {escape(str(report.latency_source))}; per workload the mean of its PASSED runs; "
            f"total {_us(report.total_latency_ms)} us"
        )
    else:
        con.print(
            "[yellow]counts only[/]: no latency (pass --results FILE); latency shares are null"
        )
    const = ", ".join(f"{k}={v}" for k, v in report.const_axes.items()) or "none"
    varying = ", ".join(f"{a} ({report.binning[a]})" for a in report.varying_axes) or "none"
    derived = "".join(f"   derived: {a} = {e}" for a, e in report.derived_axes.items())
    con.print(escape(f"varying: {varying}{derived}   const: {const}"))
    dev = report.device or {}
    if dev:
        con.print(
            f"device: {escape(str(dev['name']))} {dev['bandwidth_tbs']} TB/s, {dev['bf16_tflops']} TFLOP/s bf16 "
            f"[dim]({escape(str(dev['source']))}; {escape(str(dev.get('chosen_by', '')))})[/]  floor = max(bytes / bandwidth, FLOPs / rate); "
            "SoL % (speed of light) = 100 x floor / latency, 100 = at the floor"
        )

    t = Table(box=None, pad_edge=False, header_style="bold", title="bands", title_justify="left")
    t.add_column("band", ratio=1, overflow="fold")
    for col in ("workloads", "passed", "mean us", "share", "floor us", "SoL %"):
        t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    t.add_column("", no_wrap=True, min_width=7)
    for b in report.bands:
        share = "-" if b.latency_share is None else f"{b.latency_share:.1%}"
        passed = "-" if b.passed is None else f"{b.passed}/{b.workloads}"
        floor = "-" if b.mean_floor_us is None else f"{b.mean_floor_us:.3g}"
        sol = format_speed_of_light(b.mean_speed_of_light_pct)
        flag = "[red]outlier[/]" if b.outlier else ("[dim]merged[/]" if b.kind == "merged" else "")
        t.add_row(
            escape(b.name),
            str(b.workloads),
            passed,
            _us(b.mean_latency_ms),
            share,
            floor,
            sol,
            flag,
        )
    con.print(t)
    if report.outliers:
        con.print(
            "[bold red]outliers[/]: "
            + escape(
                "; ".join(
                    f"{d.get('uuid') or d['name']} ({d['latency_share']:.0%} of latency)"
                    for d in report.outlier_details
                )
            )
        )
    lo, hi = report.target_representatives
    con.print(f"[bold]representatives[/] (target {lo}-{hi} of {report.workload_count} workloads)")
    for r in report.representatives:
        lat = "" if r.latency_ms is None else f"  {_us(r.latency_ms)} us"
        pin = "  [cyan]pinned[/]" if r.pinned else ""
        con.print(
            f"  {escape(r.uuid)}  {escape(r.band)}{lat}{pin}",
            no_wrap=True,
            overflow="ignore",
            crop=False,
        )
        con.print(f"      [dim]{escape(r.reason)}[/]")
    chart = latency_chart(report)
    if chart:
        from rich.text import Text

        con.print(Text(chart))
    for note in report.notes:
        con.print(f"[yellow]note[/] {escape(note)}")


def latency_chart(report: RegimeReport, width: int = 78, height: int = 16) -> str | None:
    """A plotext chart of latency (us) against the dominant axis, with the floor; None without
    latency. Above 2,000 workloads each axis value shows its mean latency."""
    import re

    import plotext as plt  # type: ignore[import-untyped]  # plotext ships no type hints
    import polars as pl

    axis = report.dominant_axis
    if not report.has_latency or axis is None:
        return None
    data = report.table.filter(pl.col("latency_ms").is_not_null())
    if data.height == 0:
        return None
    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    if data.height > 2000:
        data = (
            data.group_by(axis)
            .agg(pl.col("latency_ms").mean(), pl.col("floor_us").mean())
            .sort(axis)
        )
        label = "mean latency"
    else:
        data = data.sort([axis, "line"])
        label = "latency"
    xs = [float(v) for v in data.get_column(axis).to_list()]
    plt.scatter(
        xs, [v * 1000 for v in data.get_column("latency_ms").to_list()], label=label, marker="dot"
    )
    floors = data.group_by(axis).agg(pl.col("floor_us").mean()).sort(axis).drop_nulls()
    if floors.height:
        plt.plot(
            [float(v) for v in floors.get_column(axis).to_list()],
            floors.get_column("floor_us").to_list(),
            label="floor",
        )
    if min(xs) > 0 and max(xs) / min(xs) >= 16:
        plt.xscale("log")
    ys = [float(v) for v in data.get_column("latency_ms").to_list()]  # filtered: none is null
    if min(ys) > 0 and max(ys) / min(ys) >= 100:
        plt.yscale("log")
    plt.title(f"latency vs {axis}")
    plt.xlabel(axis)
    plt.ylabel("us")
    text = plt.build()
    plt.clear_figure()
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
