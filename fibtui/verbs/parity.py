"""``fibtui parity``: the official-shape flashinfer-bench run, beside fibtui's own gate.

- ``fibtui parity --print [--workloads ...] [--json]``: the exact command, nothing run;
- ``fibtui parity [--workloads rep|all|UUID,...] [--solution DIR] [--against RUN] [--json]``: run it, import the
  traces, compare with fibtui's newest record of the same workloads, archive everything under
  ``optimize_ops/parity/<id>/``;
- ``fibtui parity --import DIR_OR_TRACES [--against RUN] [--json]``: the same for a result made
  elsewhere (another machine, the official evaluation);
- ``fibtui parity --status [--json]``: the newest parity record of the definition.

Each record says which flashinfer-bench ran (``bench``: ``version``, ``commit``, ``release``,
``cupti_python``, ``flashinfer``, ``cuda_event_fallback``, ``timing``) and what its
``eval_config.yaml`` sets for the definition (``eval_config``), with a warning when its CUPTI
timer fell back to CUDA events, when it is a release the contest does not run (the contest runs
flashinfer-bench's main branch), and where its eval_config differs from fibtui's preset
(fibtui.core.provenance).

Exit codes: 0 when the parity record is N/N PASSED and no verdict differs from fibtui's; 1
otherwise (including ``--status`` with no complete record); 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

    from fibtui.core.workspace import Workspace
    from fibtui.runners.parity import Comparison, ParityPlan, ParityRecord
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser(
        "parity",
        help="run flashinfer-bench in the official shape and compare it with fibtui's gate",
    )
    common(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--print",
        dest="print_only",
        action="store_true",
        help="show the exact command; run nothing",
    )
    mode.add_argument(
        "--import",
        dest="import_path",
        metavar="DIR_OR_TRACES",
        help="archive and compare an existing parity result (a traces JSONL or a folder holding traces/)",
    )
    mode.add_argument(
        "--status", action="store_true", help="the newest parity record of the definition"
    )
    p.add_argument(
        "--workloads",
        default="rep",
        metavar="rep|all|UUID,...",
        help="representatives (default), every workload, or a list of uuids (unique prefixes work)",
    )
    p.add_argument(
        "--definition", metavar="NAME", help="the definition (per-definition workspaces)"
    )
    p.add_argument(
        "--solution",
        metavar="DIR|SOLUTION_JSON",
        help="run this candidate (a contest-style folder, a bare folder of sources, or a solution.json) "
        "instead of config.toml's solution",
    )
    p.add_argument(
        "--against",
        metavar="RUN_ID|RUN_JSON",
        help="the fibtui run to compare with (default: the newest run holding the solution, GPU runs first)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=parity)


def _representatives(ws: Workspace, args: argparse.Namespace) -> list[str] | None:
    if args.workloads != "rep":
        return None
    from fibtui.core.plan import gate_representatives

    return gate_representatives(ws, args.definition)


def parity(args: argparse.Namespace) -> int:
    from fibtui.verbs._common import workspace_from

    ws = workspace_from(args)
    assert ws is not None
    if args.status:
        return _status(args, ws)
    if args.import_path:
        from fibtui.runners.parity import import_parity

        return _show(args, import_parity(ws, args.import_path, args.definition, args.against))
    from fibtui.runners.parity import plan_parity

    plan = plan_parity(
        ws, args.workloads, args.definition, _representatives(ws, args), args.solution
    )
    if args.print_only:
        return _print_plan(args, plan)
    return _run(args, ws, plan)


def _print_plan(args: argparse.Namespace, plan: ParityPlan) -> int:
    from fibtui.verbs._common import emit_json

    if args.json:
        emit_json(plan.to_json())
        return 0
    from rich.markup import escape

    from fibtui.verbs._common import console

    con = console()
    con.print(escape(plan.command_line), soft_wrap=True)
    con.print(
        f"[dim]# {len(plan.workloads)} workload(s) ({escape(plan.selection)}), solution {escape(plan.solution)} "
        f"packed from config.toml; flags: {escape(plan.preset_source)}[/]",
        soft_wrap=True,
    )
    con.print(
        f"[dim]# DIR is made when the run starts: {escape(str(plan.dataset_dir))}[/]",
        soft_wrap=True,
    )
    if plan.launcher != "PATH":
        con.print("[dim]# flashinfer-bench is not on PATH: it runs through this Python[/]")
    if not plan.bench_installed:
        con.print(
            "[yellow]! "
            + escape(
                "flashinfer-bench is not installed here: pip install 'fibtui[bench]', or run it "
                "elsewhere and bring the traces back with fibtui parity --import"
            )
            + "[/]",
            soft_wrap=True,
        )
    return 0


def _run(args: argparse.Namespace, ws: Workspace, plan: ParityPlan) -> int:
    import threading

    from fibtui.core.errors import UsageError
    from fibtui.runners.parity import run_parity
    from fibtui.verbs._common import console

    if not plan.bench_installed:
        raise UsageError(
            "flashinfer-bench is not installed here: pip install 'fibtui[bench]' (or run it on the GPU "
            "machine and import the traces: fibtui parity --import DIR)"
        )
    con = console()
    con.file = sys.stderr if args.json else sys.stdout
    from rich.markup import escape

    con.print(
        f"[bold]parity[/] {escape(plan.definition)}: {len(plan.workloads)} workload(s), solution "
        f"{escape(plan.solution)}",
        soft_wrap=True,
    )
    con.print(f"[dim]$ {escape(plan.command_line)}[/]", soft_wrap=True)
    from fibtui.verbs._common import CancelOnSignals

    cancel = threading.Event()
    try:
        with CancelOnSignals(cancel, "flashinfer-bench; what it finished is archived") as signals:
            record = run_parity(
                ws,
                plan,
                on_line=lambda line: con.print(f"[dim]  {escape(line)}[/]", soft_wrap=True),
                cancel=cancel,
                against=args.against,
                stopped_by=lambda: signals.name,
            )
    except KeyboardInterrupt:
        cancel.set()
        sys.stderr.write("\ninterrupted: the parity run was stopped\n")
        return 130
    code = _show(args, record)
    return 128 + signals.received if signals.received else code


def _status(args: argparse.Namespace, ws: Workspace) -> int:
    from fibtui.core.numbers import count
    from fibtui.runners.parity import parity_status
    from fibtui.verbs._common import console, emit_json

    cfg = ws.config_for(args.definition)
    st = parity_status(ws, cfg.definition)
    if args.json:
        emit_json({"definition": cfg.definition, "parity": st.to_json() if st else None})
    else:
        from rich.markup import escape

        con = console()
        if st is None:
            con.print(f"{escape(cfg.definition)}: no parity run yet (fibtui parity)")
        else:
            colour = "green" if st.complete else "red"
            con.print(
                f"{escape(cfg.definition)}: parity {escape(st.id)} ({escape(st.source)}, {st.finished}): "
                f"[{colour}]{st.passed}/{st.total} PASSED[/], {count(st.warnings, 'warning')}"
            )
    return 0 if st is not None and st.complete else 1


def _fmt_us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1000:.2f}"


def _rows_table(comp: Comparison) -> Table:
    """One row per workload: its whole uuid, axes, flashinfer-bench's status and latency, fibtui's."""
    from rich.markup import escape
    from rich.table import Table

    twin = any(r.official_latency_ms is not None for r in comp.rows)
    t = Table(
        "workload",
        "axes",
        "bench",
        "us",
        "fibtui",
        "us",
        "ratio",
        *(("official us", "ratio") if twin else ()),
        box=None,
        pad_edge=False,
        header_style="bold",
    )
    for r in comp.rows:
        axes = " ".join(f"{k}={v}" for k, v in r.axes.items())
        bcol = "green" if r.bench_status == "PASSED" else "red"
        fcol = "green" if r.fibtui_status == "PASSED" else "red"
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        if r.flag == "verdict":
            ratio = "[red]verdicts differ[/]"
        elif r.flag == "latency":
            ratio = f"[yellow]{ratio}[/]"
        logged = " [dim](log)[/]" if r.bench_from == "log" else ""
        t.add_row(
            escape(r.uuid),
            escape(axes),
            f"[{bcol}]{escape(r.bench_status)}[/]{logged}",
            _fmt_us(r.bench_latency_ms),
            f"[{fcol}]{r.fibtui_status}[/]" if r.fibtui_status else "-",
            _fmt_us(r.fibtui_latency_ms),
            ratio,
            *(
                (
                    _fmt_us(r.official_latency_ms),
                    f"{r.official_ratio:.3f}x" if r.official_ratio is not None else "-",
                )
                if twin
                else ()
            ),
        )
    return t


def _show(args: argparse.Namespace, record: ParityRecord) -> int:
    from fibtui.verbs._common import emit_json

    mismatches = sum(len(c.verdict_mismatches) for c in record.comparisons)
    ok = record.complete and not mismatches
    if args.json:
        emit_json(record.to_json())
        return 0 if ok else 1
    from rich.markup import escape

    from fibtui.verbs._common import console, print_table

    con = console()
    hw = record.environment.get("hardware") or "?"
    for comp in record.comparisons:
        con.print(
            f"[bold]{escape(comp.solution)}[/]: flashinfer-bench ({escape(hw)}) beside "
            f"{escape(comp.fibtui or 'no fibtui record')}"
        )
        print_table(con, _rows_table(comp), ids=["workload"], drop=["axes"])
        # a terminal wraps these at spaces; a wide console (a pipe, --wide) keeps each on one line
        for w in comp.warnings:
            con.print(f"[yellow]! {escape(w)}[/]")
        for n in comp.notes:
            con.print(f"[dim]  {escape(n)}[/]")
    if record.bench:
        from fibtui.core.provenance import describe

        con.print(f"[dim]{escape(describe(record.bench))}[/]")
    for w in record.provenance_warnings:
        con.print(f"[yellow]! {escape(w)}[/]")
    for n in record.notes:
        con.print(f"[dim]  {escape(n)}[/]")
    colour = "green" if record.complete else "red"
    state = "submission-ready as far as parity goes" if ok else "not submission-ready"
    con.print(
        f"parity {record.id}: [{colour}]{record.passed}/{record.total} PASSED[/] for {escape(record.solution)} "
        f"({state}); archived in {escape(str(record.path))}"
    )
    return 0 if ok else 1
