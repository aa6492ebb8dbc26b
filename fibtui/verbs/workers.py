"""``fibtui workers status [--json]`` and ``fibtui workers stop``: the worker service that keeps
ready workers for ``fibtui run`` and the TUI (fibtui/runners/service; docs/architecture.md).

``status --json`` prints ``running`` (false when no service answers) and ``socket``; with a
service also ``pid``, ``facts``, ``idle_timeout_s``, ``idle_s``, ``uptime_s``, ``ready`` (each
``key``, ``device``, ``interpreter``, ``pid``, ``ready_for_s``, ``runs``: the runs it served),
``starting``, ``waiting`` (starts held until a run on that GPU is over: ``key``, ``device``) and
``handed`` (workers handed to a run: ``pid``, ``device``, ``owner_pid``, ``for_s``) and
``current`` (its facts are this fibtui's: false means the next run restarts it).
"""

from __future__ import annotations

import argparse


def register(sub, common) -> None:
    p = sub.add_parser("workers", help="the worker service that keeps workers ready: status, stop")
    wsub = p.add_subparsers(
        dest="workers_verb", metavar="ACTION", required=True, parser_class=type(p)
    )
    sp = wsub.add_parser("status", help="is it running, which workers are ready or in use")
    common(sp)
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=status)
    tp = wsub.add_parser(
        "stop", help="stop it and its ready workers (workers in use by a run go on)"
    )
    common(tp)
    tp.set_defaults(func=stop)


def _client():
    """This installation's service client, or the socket's path when its folder does not exist
    (then no service runs; nothing is created to say so)."""
    from fibtui.runners.service.client import Client
    from fibtui.runners.service.common import ServiceAbsent

    try:
        return Client(create=False), None
    except ServiceAbsent as absent:
        return None, absent.path


def status(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from fibtui.runners.service.common import facts, log_path
    from fibtui.verbs._common import console, emit_json

    client, path = _client()
    found = client.ask({"op": "status"}) if client is not None else None
    path = client.path if client is not None else path
    if args.json:
        out = {"running": found is not None, "socket": str(path)}
        if found is not None:
            found.pop("ok", None)
            out |= found | {"current": found.get("facts") == facts()}
        emit_json(out)
        return 0
    con = console()
    if found is None:
        con.print(escape(f"no worker service is running (socket {path})"))
        return 0
    for line in _lines(found, found.get("facts") == facts(), log_path(path)):
        con.print(escape(line), soft_wrap=True)
    return 0


def _lines(found: dict, current: bool, log) -> list[str]:
    f = found.get("facts") or {}
    gpus = f.get("gpus") or []
    lines = [
        f"worker service pid {found.get('pid')}, up {found.get('uptime_s')} s, idle "
        f"{found.get('idle_s')} s (it exits after {found.get('idle_timeout_s'):g} s idle)",
        f"  socket {found.get('socket')}  log {log}",
        f"  fibtui {f.get('fibtui')} (sources {f.get('sources')}), torch {f.get('torch')}, "
        f"triton {f.get('triton')}, GPUs: {'; '.join(gpus) if gpus else 'none'}",
    ]
    if not current:
        lines.append("  it runs another fibtui, torch or GPU set: the next run restarts it")
    for w in found.get("ready") or []:
        kind = "interpreter" if w.get("interpreter") else "GPU"
        served = f", {w['runs']} run(s) served" if w.get("runs") else ""
        lines.append(
            f"  ready: {kind} {w.get('device')}  pid {w.get('pid')}  for {w.get('ready_for_s')} s"
            + served
        )
    for w in found.get("starting") or []:
        lines.append(f"  starting: {w.get('key')}  for {w.get('for_s')} s")
    for w in found.get("waiting") or []:
        lines.append(
            f"  waiting: {w.get('device')} is in use by a run; a worker starts when it ends"
        )
    for w in found.get("handed") or []:
        lines.append(
            f"  in use: {w.get('device')}  pid {w.get('pid')}, run pid {w.get('owner_pid')}, "
            f"for {w.get('for_s')} s"
        )
    if not (found.get("ready") or found.get("starting") or found.get("handed")):
        lines.append("  no worker ready or in use")
    if any(not w.get("interpreter") for w in found.get("ready") or []):
        lines.append(
            "  a ready GPU worker holds a CUDA context (GPU memory) while it waits: "
            "`fibtui workers stop` frees it"
        )
    return lines


def stop(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from fibtui.verbs._common import console

    client, path = _client()
    pid = client.stop() if client is not None else None
    if pid is None:
        console().print(escape(f"no worker service was running (socket {path})"))
    else:
        console().print(f"stopped the worker service (pid {pid}) and its ready workers")
    return 0
