"""``fibtui ncu import FILE``, ``fibtui ncu diff A B``, ``fibtui ncu profile --workload UUID``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from fibtui.core.dataset import WorkloadSet
    from fibtui.core.ncu.classify import HostGaps
    from fibtui.core.ncu.records import NcuReport
    from fibtui.core.ncu.summary import KernelSummary
    from fibtui.core.workspace import SolutionConfig, Workspace
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser("ncu", help="Nsight Compute: profile a workload, import a report, diff two")
    nsub = p.add_subparsers(dest="ncu_verb", metavar="ACTION", required=True, parser_class=type(p))

    ip = nsub.add_parser(
        "import", help="compact table + bottleneck classification of an NCU report"
    )
    ip.add_argument(
        "file",
        metavar="FILE",
        help="details CSV, raw CSV, details text page, hand-workflow result JSON, or .ncu-rep (needs ncu)",
    )
    common(ip)
    _host_options(ip)
    ip.add_argument("--json", action="store_true")
    ip.set_defaults(func=ncu_import)

    dp = nsub.add_parser("diff", help="baseline vs candidate per kernel and band")
    dp.add_argument("baseline", metavar="A")
    dp.add_argument("candidate", metavar="B")
    common(dp)
    dp.add_argument("--json", action="store_true")
    dp.set_defaults(func=ncu_diff)

    pp = nsub.add_parser(
        "profile", help="profile one workload of the solution through the worker under ncu"
    )
    common(pp)
    pp.add_argument(
        "--workload",
        required=True,
        metavar="UUID[,UUID...]",
        help="workload(s) to profile (one profiler range each; unique uuid prefixes work)",
    )
    pp.add_argument(
        "--solution", metavar="DIR", help="profile this solution (default: the workspace's)"
    )
    pp.add_argument(
        "--definition", metavar="NAME", help="default: the active solution's definition"
    )
    pp.add_argument(
        "--set", dest="section_set", default="detailed", choices=("basic", "detailed", "full")
    )
    pp.add_argument(
        "--kernel", metavar="REGEX", help="profile only kernels whose name matches (ncu regex:)"
    )
    pp.add_argument(
        "--launch-skip",
        type=int,
        default=0,
        metavar="N",
        help="matching launches to skip inside the profiled range (warm-up runs outside it)",
    )
    pp.add_argument(
        "--launch-count",
        type=int,
        default=None,
        metavar="M",
        help="matching launches to profile (default: every kernel of each profiled call)",
    )
    pp.add_argument(
        "--clock-control",
        default="none",
        metavar="MODE",
        help="ncu --clock-control (default none: clocks left alone on shared machines)",
    )
    pp.add_argument(
        "--timeout", type=float, default=600.0, metavar="S", help="seconds before ncu is stopped"
    )
    pp.add_argument(
        "--backend",
        choices=("local", "modal"),
        default="local",
        help="where ncu runs: this machine's GPU (default) or one Modal container ([modal] gpu, image)",
    )
    pp.add_argument(
        "--yes",
        action="store_true",
        help="modal: start even when the call's worst case is above [modal] confirm_above_usd",
    )
    pp.add_argument("--json", action="store_true")
    pp.set_defaults(func=ncu_profile)

    hp = nsub.add_parser(
        "host",
        help="host view: one call under torch.profiler (kernels, CPU and GPU time, launch gaps)",
    )
    common(hp)
    hp.add_argument("--workload", required=True, metavar="UUID[,UUID...]")
    hp.add_argument("--solution", metavar="DIR", help="this solution (default: the workspace's)")
    hp.add_argument(
        "--backend",
        choices=("local", "interpreter"),
        default=None,
        help="local (GPU, default when present) | interpreter (CPU: no device kernels)",
    )
    hp.add_argument(
        "--calls",
        type=int,
        default=5,
        metavar="N",
        help="profiled calls per workload (after warm-up)",
    )
    hp.add_argument("--json", action="store_true")
    hp.set_defaults(func=ncu_host)


def _host_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host-gap-us",
        type=float,
        metavar="US",
        help="idle time between launches in one call, from a host profile (enables launch-bound)",
    )
    p.add_argument(
        "--host-busy-us",
        type=float,
        metavar="US",
        help="kernel time in that call (default: the report's total kernel duration)",
    )


def _host(args: argparse.Namespace, report: NcuReport) -> HostGaps | None:
    from fibtui.core.errors import InputError
    from fibtui.core.ncu import HostGaps, launch_fields

    gap = getattr(args, "host_gap_us", None)
    busy = getattr(args, "host_busy_us", None)
    if gap is None:
        if busy is not None:
            raise InputError(None, "--host-busy-us needs --host-gap-us", field="--host-busy-us")
        return None
    if gap < 0 or (busy is not None and busy < 0):
        raise InputError(None, "host times must be >= 0", field="--host-gap-us")
    if busy is None:
        busy = sum(f["duration_us"] or 0.0 for f in map(launch_fields, report.launches))
    return HostGaps(gap_us=gap, busy_us=busy, source="command line")


# ------------------------------------------------------------------------------------- display

ROWS: list[tuple[str, str, str]] = [
    # (field, label, kind: us | pct | bytes | count | float)
    ("duration_us", "duration", "us"),
    ("compute_throughput_pct", "compute (SM) throughput", "pct"),
    ("memory_throughput_pct", "memory throughput", "pct"),
    ("dram_throughput_pct", "DRAM throughput", "pct"),
    ("l2_hit_rate_pct", "L2 hit rate", "pct"),
    ("registers_per_thread", "registers / thread", "count"),
    ("dynamic_shared_memory_bytes", "dynamic shared mem / block", "bytes"),
    ("static_shared_memory_bytes", "static shared mem / block", "bytes"),
    ("theoretical_occupancy_pct", "theoretical occupancy", "pct"),
    ("achieved_occupancy_pct", "achieved occupancy", "pct"),
    ("waves_per_sm", "waves per SM", "float"),
    ("grid_blocks", "grid (blocks)", "count"),
    ("block_threads", "block (threads)", "count"),
    ("block_limit_registers", "block limit: registers", "count"),
    ("block_limit_shared_memory", "block limit: shared mem", "count"),
    ("block_limit_warps", "block limit: warps", "count"),
    ("block_limit_blocks", "block limit: SM (blocks)", "count"),
    ("l2_persisting_size_bytes", "L2 persisting size", "bytes"),
    ("local_spilling_requests", "local-memory spilling requests", "count"),
]


def fmt_value(value: float | None, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "us":
        return f"{value:.2f} us"
    if kind == "pct":
        return f"{value:.2f} %"
    if kind == "bytes":
        for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
            if abs(value) >= size:
                return f"{value / size:.2f} {unit}"
        return f"{value:.0f} B"
    if kind == "count" and float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.2f}"


def _label(s: KernelSummary) -> str:
    """A kernel's column header (markup-escaped: a band's ``[...]`` is text, never a style)."""
    from rich.markup import escape

    return escape(f"{s.name} [{s.band}]" if s.band else s.name)


def _dims(d: tuple[int, int, int] | None) -> str:
    return "x".join(str(v) for v in d) if d else "-"


def print_summaries(con: Console, summaries: list[KernelSummary], title: str = "") -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(
        "metric",
        *[_label(s) for s in summaries],
        box=None,
        pad_edge=False,
        header_style="bold",
        title=title or None,
        title_justify="left",
    )
    t.add_row("instances", *[str(s.instances) for s in summaries])
    t.add_row("grid x block", *[f"{_dims(s.grid)} x {_dims(s.block)}" for s in summaries])
    for key, label, kind in ROWS:
        if any(s.get(key) is not None for s in summaries):
            t.add_row(label, *[fmt_value(s.get(key), kind) for s in summaries])
    t.add_row("[bold]bottleneck[/]", *[f"[bold]{s.bottleneck or '?'}[/]" for s in summaries])
    t.add_row("[bold]occupancy limiter[/]", *[f"[bold]{s.limiter or '-'}[/]" for s in summaries])
    con.print(t)
    for s in summaries:
        c = s.classification
        if not c.findings:
            continue
        con.print(f"\n[bold]{_label(s)}[/]")
        for f in c.findings:
            con.print(f"  [yellow]{escape(f.kind)}[/]: {escape(f.summary)}")
            for tactic in f.tactics:
                con.print(f"    [dim]try:[/] {escape(tactic)}")


def ncu_import(args: argparse.Namespace) -> int:
    from fibtui.core.ncu import attach_request, report_to_json, shape_matrix, summarize
    from fibtui.runners.ncu import load_report  # a .ncu-rep is read through ncu
    from fibtui.verbs._common import console, emit_json

    report = attach_request(load_report(args.file), args.file)
    summaries = summarize(report, _host(args, report))
    if args.json:
        emit_json(report_to_json(report, summaries))
        return 0
    from rich.markup import escape

    con = console()
    # a path is copied from here: printed whole on its line, never wrapped (at any width)
    con.print(
        f"[bold]{escape(str(report.path))}[/]  [dim]{escape(report.source_format)}, "
        f"{len(report.launches)} launch(es)[/]",
        no_wrap=True,
        overflow="ignore",
        crop=False,
    )
    print_summaries(con, summaries)
    bands = shape_matrix(summaries)
    if len(bands) > 1:
        from rich.table import Table

        t = Table(
            "band",
            "workload",
            "dominant kernel",
            "bottleneck",
            "limiter",
            box=None,
            pad_edge=False,
            header_style="bold",
            title="shape matrix",
            title_justify="left",
        )
        for row in bands:
            t.add_row(
                *[
                    str(row[k] if row[k] is not None else "-")
                    for k in ("band", "workload", "kernel", "bottleneck", "limiter")
                ]
            )
        con.print()
        con.print(t)
    for note in report.notes:
        con.print(f"[yellow]note[/] {escape(note)}")
    return 0


def ncu_diff(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.core.ncu import attach_request, diff_reports
    from fibtui.runners.ncu import load_report  # a .ncu-rep is read through ncu
    from fibtui.verbs._common import console, emit_json

    base = attach_request(load_report(args.baseline), args.baseline)
    cand = attach_request(load_report(args.candidate), args.candidate)
    diff = diff_reports(base, cand)
    if args.json:
        emit_json({"baseline": base.path, "candidate": cand.path, **diff.to_json()})
        return 0
    con = console()
    for label, path in (("baseline ", base.path), ("candidate", cand.path)):  # never wrapped
        con.print(
            f"[bold]{label}[/] {escape(str(path))}", no_wrap=True, overflow="ignore", crop=False
        )
    kinds = {key: kind for key, _, kind in ROWS}
    labels = {key: label for key, label, _ in ROWS}
    for pair in diff.pairs:
        head = f"\n[bold]{escape(pair.kernel)}[/]" + (
            f" \\[{escape(pair.band)}]" if pair.band else ""
        )
        b, c = pair.baseline.classification, pair.candidate.classification
        head += escape(
            f"  bottleneck {b.bottleneck or '?'} -> {c.bottleneck or '?'}, "
            f"limiter {b.limiter or '-'} -> {c.limiter or '-'}"
        )
        con.print(head)
        if pair.classification_changed:
            con.print(f"  [bold red]classification changed:[/] {escape('; '.join(pair.changes))}")
        t = Table(
            "metric", "before", "after", "delta", "%", box=None, pad_edge=False, header_style="bold"
        )
        for m in pair.metrics:
            kind = kinds.get(m.metric, "float")
            delta = (
                "-" if m.delta is None else ("+" if m.delta > 0 else "") + fmt_value(m.delta, kind)
            )
            pct = "-" if m.pct is None else f"{m.pct:+.1f}%"
            style = (
                ""
                if m.metric != "duration_us" or not m.delta
                else ("green" if m.delta < 0 else "red")
            )
            t.add_row(
                labels.get(m.metric, m.metric),
                fmt_value(m.before, kind),
                fmt_value(m.after, kind),
                f"[{style}]{delta}[/]" if style else delta,
                pct,
            )
        con.print(t)
    for band, kernel in diff.only_in_baseline:
        con.print(
            f"[yellow]only in baseline[/]  {escape(kernel)}"
            + (f" \\[{escape(band)}]" if band else "")
        )
    for band, kernel in diff.only_in_candidate:
        con.print(
            f"[yellow]only in candidate[/] {escape(kernel)}"
            + (f" \\[{escape(band)}]" if band else "")
        )
    if not diff.pairs:
        con.print("[yellow]no kernel matched between the two reports[/]")
    return 0


def ncu_profile(args: argparse.Namespace) -> int:
    import json
    import re

    from fibtui.core.errors import InputError
    from fibtui.core.fsio import atomic_copy_file, atomic_write_json, reserve_unique_path
    from fibtui.core.ncu import attach_workloads, load_exported, report_to_json, summarize
    from fibtui.runners import ncu as runner
    from fibtui.verbs._common import console, emit_json, workspace_from

    if args.launch_skip < 0:
        raise InputError(None, "must be >= 0", field="--launch-skip")
    if args.launch_count is not None and args.launch_count < 1:
        raise InputError(None, "must be >= 1", field="--launch-count")
    if args.timeout <= 0:
        raise InputError(None, "must be > 0 seconds", field="--timeout")
    if args.kernel is not None:
        try:
            re.compile(args.kernel)
        except re.error as exc:
            raise InputError(
                None, f"not a valid regular expression: {exc}", field="--kernel"
            ) from None
    from fibtui.core.plan import select_workloads
    from fibtui.services.runs import profile_request

    ws = workspace_from(args)
    config = ws.config_for(args.definition)
    dataset = ws.dataset()
    definition = dataset.definition(config.definition)
    workloads = dataset.workloads(config.definition)
    uuids = select_workloads(args.workload, definition, dataset)
    out_dir = ws.archive_root / "benchmarks" / "ncu"
    label = Path(args.solution).name if args.solution else config.name
    stem = f"{config.definition}_{label}_{'-'.join(u[:8] for u in uuids[:4])}_{args.section_set}"
    rep = reserve_unique_path(out_dir / f"{stem}.ncu-rep")
    request = rep.with_name(rep.name[: -len(".ncu-rep")] + "_request.json")
    # ncu's console log is written outside the archive first: a failed profile leaves nothing there
    # (the log it names stays under the workspace's .fibtui/ncu/)
    log = ws.state_dir / "ncu" / (rep.name[: -len(".ncu-rep")] + "_ncu.log")
    ours = [rep, request, *(p for p in runner.sibling_paths(rep).values() if not p.exists())]
    if getattr(args, "backend", "local") == "modal":
        return _profile_on_modal(args, ws, uuids, config, rep, request, workloads)
    try:
        atomic_write_json(request, profile_request(ws, uuids, args.solution, config.definition))
        result = runner.profile(
            runner.worker_profile_argv(request),
            rep,
            kernel_regex=args.kernel,
            launch_skip=args.launch_skip,
            launch_count=args.launch_count,
            section_set=args.section_set,
            clock_control=args.clock_control,
            timeout_s=args.timeout,
            cwd=ws.root,
            env=runner.worker_env(),
            profile_from_start=False,
            log=log,
        )
        report = load_exported(result.details_csv, result.raw_csv)
        result.log = atomic_copy_file(
            log, runner.sibling_paths(rep)["log"]
        )  # kept beside the report
    except BaseException:
        for path in ours:
            path.unlink(missing_ok=True)
        raise
    log.unlink(missing_ok=True)
    attach_workloads(report, [{"uuid": u, "axes": workloads.axes_of(u)} for u in uuids])
    summaries = summarize(report)
    if args.json:
        emit_json({"profile": result.to_json(), **report_to_json(report, summaries)})
        return 0
    con = console()
    con.print(
        f"[green]✓[/] {result.report}\n  pages: {result.details_csv.name}, {result.raw_csv.name}, "
        f"{result.details_txt.name}  command: {json.dumps(result.command)}"
    )
    print_summaries(con, summaries)
    return 0


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")


def _profile_on_modal(
    args: argparse.Namespace,
    ws: Workspace,
    uuids: list[str],
    config: SolutionConfig,
    rep: Path,
    request_path: Path,
    workloads: WorkloadSet,
) -> int:
    """``ncu profile --backend modal``: the same request and ncu command in one Modal container
    (fibtui.runners.modal_ncu); the report lands where a local one does."""

    from fibtui.core.errors import UsageError
    from fibtui.core.fsio import atomic_write_json
    from fibtui.core.ncu import attach_workloads, load_exported, report_to_json, summarize
    from fibtui.runners import modal_ncu
    from fibtui.runners import ncu as runner
    from fibtui.services.runs import profile_request
    from fibtui.verbs._common import console, emit_json

    cost, limit = modal_ncu.profile_cost(ws, args.timeout)
    if cost > limit and not args.yes:
        rep.unlink(missing_ok=True)
        raise UsageError(
            f"the worst case of this profile call is about ${cost:.2f}, more than [modal] "
            f"confirm_above_usd (${limit:.2f}): nothing was launched; rerun with --yes"
        )
    body = profile_request(ws, uuids, args.solution, config.definition)
    log = runner.sibling_paths(rep)["log"]
    ours = [rep, request_path, *(p for p in runner.sibling_paths(rep).values() if not p.exists())]
    try:
        atomic_write_json(request_path, body)
        result = modal_ncu.profile_on_modal(
            ws,
            body,
            rep,
            kernel_regex=args.kernel,
            launch_skip=args.launch_skip,
            launch_count=args.launch_count,
            section_set=args.section_set,
            clock_control=args.clock_control,
            timeout_s=args.timeout,
            say=_say,
            handles=getattr(args, "_modal_handles", None),
            container_paths=not getattr(args, "_modal_local_paths", False),
        )
        report = load_exported(result.details_csv, result.raw_csv)
    except BaseException:
        for path in ours:
            if path != log:  # ncu's log stays: the error names it
                path.unlink(missing_ok=True)
        raise
    attach_workloads(report, [{"uuid": u, "axes": workloads.axes_of(u)} for u in uuids])
    summaries = summarize(report)
    if args.json:
        emit_json(
            {"profile": result.to_json(), "backend": "modal", **report_to_json(report, summaries)}
        )
        return 0
    con = console()
    from rich.markup import escape

    con.print(
        f"[green]✓[/] {escape(str(result.report))} (on Modal)",
        no_wrap=True,
        overflow="ignore",
        crop=False,
    )
    print_summaries(con, summaries)
    return 0


def ncu_host(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.core import backends
    from fibtui.core.errors import InputError
    from fibtui.core.hostview import summarize as summarize_host
    from fibtui.runners.hostview import host_view, require_uuids
    from fibtui.runners.registry import default_backend
    from fibtui.verbs._common import console, emit_json, workspace_from

    if args.calls < 1:
        raise InputError(None, "must be >= 1", field="--calls")
    ws = workspace_from(args)
    backend = args.backend or default_backend(backends.detect())
    payload = host_view(ws, require_uuids(args.workload, ws), args.solution, backend, args.calls)
    views = summarize_host(payload)
    if args.json:
        emit_json(
            {
                "device": payload.get("device"),
                "backend": backend,
                "workloads": [v.to_json() for v in views],
                "trace": payload,
            }
        )
        return 0
    con = console()

    def fmt(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "-"

    con.print(
        f"[bold]host view[/] on {escape(str(payload.get('device')))} ({backend}), {args.calls} calls per workload"
    )
    for v in views:
        axes = " ".join(f"{k}={val}" for k, val in v.axes.items())
        con.print(
            f"\n[bold]{v.uuid[:13]}[/] {axes}: host {fmt(v.host_us)} us/call, device busy {fmt(v.busy_us)} us, "
            f"span {fmt(v.span_us)} us, gaps {fmt(v.gap_us)} us, {v.kernels_per_call:.1f} kernel(s)/call"
        )
        if v.kernels:
            t = Table(
                "kernel",
                "per call",
                "mean us",
                "us per call",
                box=None,
                pad_edge=False,
                header_style="bold",
            )
            for k in v.kernels[:10]:
                t.add_row(
                    escape(k.name[:70]),
                    f"{k.per_call:.1f}",
                    f"{k.mean_us:.2f}",
                    f"{k.total_us:.2f}",
                )
            con.print(t)
        if v.top_cpu_ops:
            con.print(
                "  CPU: "
                + ", ".join(f"{escape(n[:40])} {us:.0f} us" for n, us in v.top_cpu_ops[:5])
            )
        con.print(f"  [yellow]{escape(v.verdict)}[/]")
    return 0
