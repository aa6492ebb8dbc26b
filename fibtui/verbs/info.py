"""``fibtui status`` and ``fibtui check``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub, common) -> None:
    p = sub.add_parser("status", help="workspace, solution, definitions, dataset, topology, backends")
    common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=status)

    p = sub.add_parser("check", help="check the workspace topology (exit 1 when invalid)")
    common(p)
    p.add_argument("dir", nargs="?", metavar="DIR")
    p.add_argument("--json", action="store_true")
    p.add_argument("--deep", action="store_true", help="also validate every workload line strictly")
    p.set_defaults(func=check)


def status_json(ws, probe_gpu: bool = True) -> dict[str, Any]:
    from fibtui.core import backends
    from fibtui.core.errors import FibError

    be = backends.detect(probe_gpu=probe_gpu).to_json()
    if ws is None:
        return {"workspace": None, "solution": None, "definitions": [], "dataset": None,
                "topology": None, "backends": be}
    active = ws.active
    dataset: dict[str, Any] = {"path": str(ws.dataset_root) if ws.dataset_root else None, "source": ws.dataset_source}
    definitions: list[dict[str, Any]] = []
    if ws.dataset_root is not None:
        ds = ws.dataset()
        dataset["definitions"] = len(ds.definition_names)
        for c in ws.configs:
            entry: dict[str, Any] = {"name": c.definition, "in_dataset": c.definition in ds.definition_paths,
                                     "workloads": None, "config": str(c.path)}
            if entry["in_dataset"]:
                try:
                    entry["workloads"] = len(ds.workloads(c.definition))
                    d = ds.definition(c.definition)
                    entry["op_type"] = d.op_type
                    entry["varying_axes"] = d.var_axes
                except FibError as exc:
                    entry["error"] = exc.one_line()
            definitions.append(entry)
    else:
        definitions = [{"name": c.definition, "in_dataset": None, "workloads": None, "config": str(c.path)} for c in ws.configs]
    return {
        "workspace": str(ws.root),
        "solution": None if active is None else {
            "name": active.name, "definition": active.definition, "author": active.author,
            "language": active.language, "entry_point": active.entry_point,
            "destination_passing_style": active.dps, "binding": active.binding, "config": str(active.path),
        },
        "definitions": definitions,
        "dataset": dataset,
        "topology": {"kind": ws.topology.kind, "valid": ws.topology.valid,
                     "problems": [str(p) for p in ws.topology.problems]},
        "backends": be,
    }


def status(args: argparse.Namespace) -> int:
    from rich.table import Table

    from fibtui.verbs._common import console, emit_json, workspace_from

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
        con.print(f"[bold]workspace[/]  {info['workspace']}  ({info['topology']['kind']})")
        if sol:
            con.print(f"[bold]solution[/]   {sol['name']} by {sol['author'] or '?'}: {sol['language']} {sol['entry_point']}"
                      f"{'' if sol['destination_passing_style'] else ' (value-returning)'}")
        ds = info["dataset"]
        con.print(f"[bold]dataset[/]    {ds['path'] or 'none'}  [dim]({ds['source']})[/]")
        table = Table("definition", "in dataset", "workloads", "varying axes", box=None, pad_edge=False)
        for d in info["definitions"]:
            table.add_row(d["name"], {True: "yes", False: "[red]no[/]", None: "?"}[d["in_dataset"]],
                          str(d["workloads"] if d["workloads"] is not None else "-"),
                          ", ".join(d.get("varying_axes", [])) or d.get("error", "-"))
        con.print(table)
        for p in info["topology"]["problems"]:
            con.print(f"[red]problem[/]    {p}")
    be = info["backends"]
    con.print(
        "[bold]backends[/]   "
        f"GPU: {', '.join(be['gpu_names']) or 'none'} · ncu: {be['ncu'] or 'none'} · "
        f"interpreter: {'yes' if be['interpreter'] else 'no (install the gpu extra)'} · "
        f"flashinfer-bench: {'yes' if be['flashinfer_bench'] else 'no'} · "
        f"Modal credentials: {be['modal_credentials'] or 'none'}"
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
    problems = [str(p) for p in topo.problems]
    if args.deep and ws.dataset_root is not None:
        ds = ws.dataset()
        for c in topo.configs:
            try:
                ds.workloads(c.definition).validate_all()
            except FibError as exc:
                problems.append(exc.one_line())
    if args.json:
        emit_json({"workspace": str(ws.root), "topology": topo.kind, "valid": not problems,
                   "configs": [str(c.path) for c in topo.configs], "problems": problems})
    else:
        con = console()
        if problems:
            for p in problems:
                con.print(f"[red]✗[/] {p}")
        else:
            con.print(f"[green]✓[/] {ws.root}: {topo.kind} topology, {len(topo.configs)} solution config(s), no problems")
    return 1 if problems else 0
