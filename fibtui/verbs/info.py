"""``fibtui status`` and ``fibtui check``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fibtui.core.workspace import Topology, Workspace
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser(
        "status", help="workspace, solution, definitions, dataset, topology, backends"
    )
    common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=status)

    p = sub.add_parser("check", help="check the workspace topology (exit 1 when invalid)")
    common(p)
    p.add_argument("dir", nargs="?", metavar="DIR")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--deep",
        action="store_true",
        help="also validate every workload line strictly and build every solution and candidate "
        "(import Python/Triton ones in a worker subprocess; compile CUDA/C++ ones where this machine can)",
    )
    p.set_defaults(func=check)


def status_json(ws: Workspace | None, probe_gpu: bool = True) -> dict[str, Any]:
    from fibtui.core import backends, toolchain
    from fibtui.core.errors import FibError
    from fibtui.core.presets import preset_for

    be = backends.detect(probe_gpu=probe_gpu).to_json()
    be["toolchain"] = toolchain.detect().to_json()
    reference = ws.root / "reference" if ws is not None else None
    be["cutlass"] = [h.to_json() for h in toolchain.find_cutlass(reference)]
    if ws is None:
        return {
            "workspace": None,
            "solution": None,
            "definitions": [],
            "dataset": None,
            "topology": None,
            "candidates": [],
            "backends": be,
        }
    active = ws.active
    dataset: dict[str, Any] = {
        "path": str(ws.dataset_root) if ws.dataset_root else None,
        "source": ws.dataset_source,
    }
    definitions: list[dict[str, Any]] = []
    if ws.dataset_root is not None:
        ds = ws.dataset()
        dataset["definitions"] = len(ds.definition_names)
        for c in ws.configs:
            entry: dict[str, Any] = {
                "name": c.definition,
                "in_dataset": c.definition in ds.definition_paths,
                "workloads": None,
                "config": str(c.path),
            }
            if entry["in_dataset"]:
                try:
                    entry["workloads"] = len(ds.workloads(c.definition))
                    d = ds.definition(c.definition)
                    entry["op_type"] = d.op_type
                    entry["varying_axes"] = d.var_axes
                    entry["evaluation"] = preset_for(d).to_json()
                except FibError as exc:
                    entry["error"] = exc.one_line()
            definitions.append(entry)
    else:
        definitions = [
            {"name": c.definition, "in_dataset": None, "workloads": None, "config": str(c.path)}
            for c in ws.configs
        ]
    return {
        "workspace": str(ws.root),
        "solution": None
        if active is None
        else {
            "name": active.name,
            "definition": active.definition,
            "author": active.author,
            "language": active.language,
            "entry_point": active.entry_point,
            "destination_passing_style": active.dps,
            "binding": active.binding,
            "config": str(active.path),
        },
        "definitions": definitions,
        "dataset": dataset,
        "topology": {
            "kind": ws.topology.kind,
            "valid": ws.topology.valid,
            "problems": [str(p) for p in ws.topology.problems],
        },
        "candidates": [c.to_json() for c in ws.topology.candidates],
        "backends": be,
    }


def status(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.verbs._common import console, emit_json, print_table, workspace_from

    ws = workspace_from(args, required=False)
    info = status_json(ws)
    if args.json:
        emit_json(info)
        return 0
    con = console()
    if ws is None:
        con.print("[bold]workspace[/]  none found from this folder upward (try: fibtui demo DIR)")
    else:
        sol = info["solution"] or {}
        con.print(f"[bold]workspace[/]  {escape(info['workspace'])}  ({info['topology']['kind']})")
        if sol:
            con.print(
                f"[bold]solution[/]   {escape(sol['name'])} by {escape(sol['author'] or '?')}: "
                f"{escape(sol['language'])} {escape(sol['entry_point'])}"
                f"{'' if sol['destination_passing_style'] else ' (value-returning)'}"
            )
        ds = info["dataset"]
        con.print(
            f"[bold]dataset[/]    {escape(ds['path'] or 'none')}  [dim]({escape(ds['source'])})[/]"
        )
        table = Table(
            "definition", "in dataset", "workloads", "varying axes", box=None, pad_edge=False
        )
        for d in info["definitions"]:
            table.add_row(
                escape(d["name"]),
                {True: "yes", False: "[red]no[/]", None: "?"}[d["in_dataset"]],
                str(d["workloads"] if d["workloads"] is not None else "-"),
                escape(", ".join(d.get("varying_axes", [])) or d.get("error", "-")),
            )
        print_table(con, table, ids=["definition"], drop=["in dataset"])
        for d in info["definitions"]:
            if d.get("evaluation"):
                from fibtui.core.presets import EvalPreset

                judged = EvalPreset.from_json(d["evaluation"]).describe()
                con.print(f"[bold]judged by[/]  {escape(d['name'])}: {escape(judged)}")
        for p in info["topology"]["problems"]:
            con.print(f"[red]problem[/]    {escape(p)}")
        if info["candidates"]:
            cands = Table(
                "candidate", "kind", "language", "entry point", "path", box=None, pad_edge=False
            )
            for c in info["candidates"]:
                kind = "solution" if c["kind"] == "config" else "sources"
                lang = c["language"] + (f" ({c['binding']})" if c["binding"] else "")
                path = (
                    c["path"][len(info["workspace"]) + 1 :]
                    if c["path"].startswith(info["workspace"] + "/")
                    else c["path"]
                )
                cands.add_row(
                    escape(c["name"]),
                    kind,
                    lang,
                    escape(c["entry_point"]),
                    escape(path)
                    + ("" if not c["problems"] else f"  [red]{len(c['problems'])} problem(s)[/]"),
                )
            # names and paths are copied from here: never cut (print_table)
            print_table(
                con, cands, ids=["candidate", "path"], drop=["kind", "language", "entry point"]
            )
    be = info["backends"]
    con.print(
        "[bold]backends[/]   "
        f"GPU: {escape(', '.join(be['gpu_names']) or 'none')} · ncu: {escape(be['ncu'] or 'none')} · "
        f"interpreter: {'yes' if be['interpreter'] else 'no (install the gpu extra)'} · "
        f"flashinfer-bench: {'yes' if be['flashinfer_bench'] else 'no'} · "
        f"Modal credentials: {escape(be['modal_credentials'] or 'none')}"
    )
    from fibtui.core.toolchain import Toolchain

    con.print(
        f"[bold]builds[/]     {escape(Toolchain(**be['toolchain']).describe())}  [dim](CUDA/C++ solutions need a GPU, "
        "nvcc, ninja and tvm-ffi or torch; a solution this machine cannot build is UNSUPPORTED_HERE)[/]"
    )
    from rich.markup import escape

    from fibtui.core.toolchain import CUTLASS_REMEDY

    found = be.get("cutlass") or []
    if found:
        first, *rest = found
        con.print(
            f"[bold]CUTLASS[/]    {escape(first['version'] or 'version unknown')} from "
            f"{escape(first['source'])} ({escape(first['include'])})"
            + (f"  [dim]also: {escape(', '.join(h['source'] for h in rest))}[/]" if rest else "")
            + "  [dim](builds that include cute/ or cutlass/ headers use it)[/]"
        )
    else:
        con.print(
            "[bold]CUTLASS[/]    none found  [dim](a solution that includes cute/ or cutlass/ "
            f"headers is UNSUPPORTED_HERE: {escape(CUTLASS_REMEDY)})[/]"
        )
    return 0


def check(args: argparse.Namespace) -> int:
    from fibtui.core.errors import FibError
    from fibtui.core.workspace import check_topology, open_workspace
    from fibtui.verbs._common import console, emit_json, workspace_from

    if args.dir is not None:
        root = Path(args.dir)
        if not root.is_dir():
            from fibtui.core.errors import InputError

            raise InputError(root, "folder does not exist", field="DIR")
        ws = open_workspace(root, getattr(args, "dataset", None))
    else:
        ws = workspace_from(args)
    assert ws is not None
    topo = check_topology(ws.root)
    problems = [str(p) for p in topo.problems] + [str(p) for p in topo.candidate_problems]
    notes: list[str] = []
    builds: list[dict[str, Any]] = []
    if args.deep and ws.dataset_root is not None:
        ds = ws.dataset()
        for c in topo.configs:
            try:
                ds.workloads(c.definition).validate_all()
            except FibError as exc:
                problems.append(exc.one_line())
    if args.deep:
        builds = deep_builds(topo)
        for b in builds:
            if b["ok"]:
                continue
            line = f"{b['where_path']}: {b['name']}: {b['status']}: {b['error']}"
            (notes if b["status"] == "UNSUPPORTED_HERE" else problems).append(line)
    if args.json:
        emit_json(
            {
                "workspace": str(ws.root),
                "topology": topo.kind,
                "valid": not problems,
                "configs": [str(c.path) for c in topo.configs],
                "candidates": [c.to_json() for c in topo.candidates],
                "builds": builds,
                "problems": problems,
                "notes": notes,
            }
        )
    else:
        from rich.markup import escape

        con = console()
        for p in problems:
            con.print(f"[red]✗[/] {escape(p)}")
        for n in notes:
            con.print(
                f"[yellow]![/] {escape(n)}  [dim](not checked here: not a problem of the solution)[/]"
            )
        if not problems:
            cands = f", {len(topo.candidates)} candidate(s)" if topo.candidates else ""
            built = f", {sum(b['ok'] for b in builds)}/{len(builds)} built" if builds else ""
            con.print(
                f"[green]✓[/] {escape(str(ws.root))}: {topo.kind} topology, {len(topo.configs)} solution config(s){cands}{built}, no problems"
            )
    return 1 if problems else 0


def deep_builds(topo: Topology) -> list[dict[str, Any]]:
    """Build every solution config and candidate without problems in a worker subprocess: one
    entry each (``name``, ``path``, ``ok``, ``status``, ``error``, ``where_path``: the file and line
    when the failure has one, else the solution's folder)."""
    from fibtui.core import backends
    from fibtui.core.errors import FibError
    from fibtui.core.plan import solution_from_config, solution_from_path
    from fibtui.runners.buildcheck import check_builds

    items: list[tuple[str, Path, Any]] = []
    out: list[dict[str, Any]] = []
    for c in topo.configs:
        if not any(p.path == c.path for p in topo.problems):
            items.append((c.name, c.source_dir, lambda c=c: solution_from_config(c)))
    for cand in topo.candidates:
        if cand.problems:
            continue
        if cand.config is not None:
            items.append(
                (
                    cand.name,
                    cand.config.source_dir,
                    lambda cfg=cand.config: solution_from_config(cfg),
                )
            )
        else:
            items.append(
                (
                    cand.name,
                    cand.folder,
                    lambda cand=cand: solution_from_path(cand.folder, cand.owner),
                )
            )
    sources = []
    for name, folder, make in items:
        try:
            sources.append((name, folder, make()))
        except FibError as exc:
            out.append(
                {
                    "name": name,
                    "path": str(folder),
                    "ok": False,
                    "status": "COMPILE_ERROR",
                    "error": exc.one_line(),
                    "where_path": str(folder),
                }
            )
    results = check_builds([s for _, _, s in sources], backends.detect().gpu) if sources else []
    for (name, folder, _), r in zip(sources, results, strict=True):
        where = r.get("where")
        error = r.get("error")
        if where and isinstance(error, str):  # the location leads the line once
            error = error.replace(f"{where}: ", "", 1)
        out.append(
            {
                "name": name,
                "path": str(folder),
                "ok": bool(r.get("ok")),
                "status": r.get("status"),
                "error": error,
                "builder": r.get("builder"),
                "cached": r.get("cached"),
                "where_path": str(folder / where) if where else str(folder),
            }
        )
    return out
