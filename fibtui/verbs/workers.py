"""``fibtui workers status [--json]`` and ``fibtui workers stop``: the worker service that keeps
ready workers for ``fibtui run`` and the TUI (fibtui/runners/service; docs/architecture.md).

``status --json`` prints ``running`` (a service holds this installation's lock, whether it
answered or not), ``busy`` (it runs but did not answer this time: as many connections as it
serves at once), ``answered`` and ``socket``; with an answer also ``pid``, ``facts``,
``idle_timeout_s``, ``idle_s`` (seconds since the last work asked of it: ``take``, ``warm``,
``return``; asking for its status is none), ``uptime_s``, ``worker_idle_s`` (a ready worker nobody
takes is stopped after this long), ``rss_bytes`` (the service's own memory), ``ready`` (each
``key``, ``device``, ``interpreter``, ``pid``, ``ready_for_s``, ``idle_s``, ``stops_in_s``,
``rss_bytes``, ``runs``: the runs it served), ``starting``, ``waiting`` (starts held until a run on
that GPU is over: ``key``, ``device``) and ``handed`` (workers handed to a run: ``pid``, ``device``,
``owner_pid``, ``for_s``, ``rss_bytes``) and ``current`` (its facts are this fibtui's: false means
the next run restarts it).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from fibtui.runners.service.client import Client
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
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


def _client() -> tuple[Client | None, Path]:
    """This installation's service client, or the socket's path when its folder does not exist
    (then no service runs; nothing is created to say so)."""
    from fibtui.runners.service.client import Client
    from fibtui.runners.service.common import ServiceAbsent

    try:
        client = Client(create=False)
    except ServiceAbsent as absent:
        return None, absent.path
    return client, client.path


def status(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from fibtui.runners.service.client import ServiceError
    from fibtui.runners.service.common import facts, log_path
    from fibtui.verbs._common import console, emit_json
    from fibtui.worker.wire import ServiceOp, bare

    client, path = _client()
    found: dict[str, Any] | None = None
    why = ""
    if client is not None:
        path = client.path
        try:
            found = client.ask(bare(ServiceOp.STATUS), timeout=5.0)
        except (OSError, ServiceError) as exc:  # busy, or it took the connection and said nothing
            found, why = None, (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
            why = why or type(exc).__name__
        if found is not None and not found.get("ok"):
            why, found = str(found.get("error") or "it refused the request"), None
    alive = client is not None and (found is not None or client.alive())
    busy = alive and found is None
    if args.json:
        out = {"running": alive, "busy": busy, "answered": found is not None, "socket": str(path)}
        if busy:
            out["why"] = why or "it did not answer"
        if found is not None:
            found.pop("ok", None)
            out |= found | {"current": found.get("facts") == facts()}
        emit_json(out)
        return 0
    con = console()
    if busy:
        con.print(
            escape(
                f"the worker service is running but did not answer ({why or 'no reply'}): "
                f"it is busy; ask again (socket {path})"
            ),
            soft_wrap=True,
        )
        return 0
    if found is None:
        con.print(escape(f"no worker service is running (socket {path})"))
        return 0
    for line in _lines(found, found.get("facts") == facts(), log_path(path)):
        con.print(escape(line), soft_wrap=True)
    return 0


def _lines(found: dict[str, Any], current: bool, log: Path) -> list[str]:
    f = found.get("facts") or {}
    gpus = f.get("gpus") or []
    lines = [
        f"worker service pid {found.get('pid')}{_mb(found.get('rss_bytes'))}, up "
        f"{found.get('uptime_s')} s, idle {found.get('idle_s')} s (it exits after "
        f"{found.get('idle_timeout_s'):g} s idle; a ready worker is stopped after "
        f"{found.get('worker_idle_s', 0):g} s unused)",
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
            f"  ready: {kind} {w.get('device')}  pid {w.get('pid')}{_mb(w.get('rss_bytes'))}  "
            f"idle {w.get('idle_s', w.get('ready_for_s'))} s (stopped in {w.get('stops_in_s')} s)"
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
            f"  in use: {w.get('device')}  pid {w.get('pid')}{_mb(w.get('rss_bytes'))}, run pid "
            f"{w.get('owner_pid')}, for {w.get('for_s')} s"
        )
    if not (found.get("ready") or found.get("starting") or found.get("handed")):
        lines.append("  no worker ready or in use")
    if any(not w.get("interpreter") for w in found.get("ready") or []):
        lines.append(
            "  a ready GPU worker holds a CUDA context (GPU memory) while it waits: "
            "`fibtui workers stop` frees it"
        )
    ready = [w for w in found.get("ready") or [] if isinstance(w.get("rss_bytes"), int)]
    if ready:
        total = sum(w["rss_bytes"] for w in ready)
        lines.append(f"  ready workers hold {total / 2**20:.0f} MB (resident memory)")
    return lines


def _mb(rss: object) -> str:
    return f" ({rss / 2**20:.0f} MB)" if isinstance(rss, int) and not isinstance(rss, bool) else ""


def stop(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from fibtui.verbs._common import console

    client, path = _client()
    pid = client.stop() if client is not None else None
    if client is not None:
        path = client.path
    if pid is None and client is not None and client.alive():
        console().print(
            escape(
                f"the worker service is running but did not stop (it is busy): ask again "
                f"(socket {path})"
            ),
            soft_wrap=True,
        )
        return 1
    if pid is None:
        console().print(escape(f"no worker service was running (socket {path})"))
    else:
        console().print(f"stopped the worker service (pid {pid}) and its ready workers")
    return 0
