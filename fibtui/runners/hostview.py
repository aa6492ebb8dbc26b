"""Run the worker's host view (``python -m fibtui.worker host``) and read its one JSON event."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibtui.core.errors import FibError, UsageError
from fibtui.core.fsio import atomic_write_json
from fibtui.runners.ncu import worker_env
from fibtui.worker.wire import Event, event_of

if TYPE_CHECKING:
    from fibtui.core.workspace import Workspace


class HostViewFailed(FibError):
    """The worker could not record the host view (the reason is its last words)."""


def host_view(
    ws: Workspace,
    uuids: list[str],
    solution: str | None = None,
    backend: str = "local",
    calls: int = 5,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    from fibtui.runners.session import check_backend, profile_request

    check_backend(backend)
    request = profile_request(ws, uuids, solution)
    request["calls"] = calls
    if backend == "interpreter":
        request["config"].update({"backend": "interpreter", "device": "cpu"})
    env = worker_env()
    if backend == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    with tempfile.TemporaryDirectory(prefix="fibtui-host-") as tmp:
        path = Path(tmp) / "request.json"
        atomic_write_json(path, request)
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "fibtui.worker", "host", "--request", str(path)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=env,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            raise HostViewFailed(f"the host view did not finish within {timeout_s:g} s") from None
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    for ev in events:
        if event_of(ev) == Event.HOST_VIEW:
            return ev
        if event_of(ev) == Event.ERROR:
            raise HostViewFailed(str(ev.get("message")))
    tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
    raise HostViewFailed(
        f"the worker exited with {proc.returncode} and no host view: {tail or 'no output'}"
    )


def require_uuids(selection: str, ws: Workspace) -> list[str]:
    from fibtui.core.plan import select_workloads

    cfg = ws.config_for(None)
    ds = ws.dataset()
    uuids = select_workloads(selection, ds.definition(cfg.definition), ds)
    if not uuids:
        raise UsageError("no workload selected")
    return uuids
