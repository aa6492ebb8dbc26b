"""The backends a run can use, by name: what each needs, how it builds its runner, what it can do.

A backend is one :class:`Backend` in :data:`BACKENDS`. Its functions import their module when
called, so listing the backends (``--help``, the palette) imports none of them. To add one: write
its runner (anything with ``run(on_event, cancel) -> record``, :class:`fibtui.runners.events.Runner`)
in its own module, then add its ``Backend`` here; ``fibtui run --backend NAME``, resume, retry
and the TUI pick it up from this table.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fibtui.core import backends
from fibtui.core.errors import UsageError

if TYPE_CHECKING:
    from fibtui.runners.events import Runner


@dataclass(frozen=True)
class RunContext:
    """Everything a backend's runner is made from (a new run or a resumed one)."""

    ws: Any
    folder: Any
    header: Any
    definition: Any
    solutions: dict[str, Any]
    workloads: dict[str, Any]
    found: backends.Backends
    config: dict[str, Any]
    options: Any


@dataclass(frozen=True)
class Backend:
    name: str
    #: one line for ``--help`` and the palette
    summary: str
    #: (found, in_process) -> None, or a UsageError naming what this machine lacks
    check: Callable[[backends.Backends, bool], None]
    #: the run's settings -> the runner
    runner: Callable[[RunContext], Runner]
    #: (found, options) -> what the worker engine runs as on this machine ("local" | "interpreter")
    engine: Callable[[backends.Backends, Any], str]
    #: (ws, options, engine config) -> extra header settings under the backend's name, or None
    header_settings: Callable[[Any, Any, dict[str, Any]], dict[str, Any]] | None = None
    #: (ws, options) -> a plan printed by ``fibtui run --plan`` (no network), or None: no plan
    plan: Callable[[Any, Any], Any] | None = None
    #: a run costs money: ``fibtui run`` checks the plan's worst case before launching
    billed: bool = False


def _needs_torch_triton(name: str, found: backends.Backends) -> None:
    if not (found.torch and found.triton):
        raise UsageError(
            f"the {name} backend needs torch and triton in this Python ({sys.executable}): "
            "pip install 'fibtui[gpu]'"
        )


def _check_local(found: backends.Backends, in_process: bool) -> None:
    if not found.gpu:
        raise UsageError(
            "no NVIDIA GPU on this machine: use --backend interpreter (Triton's CPU interpreter) "
            "or --backend modal"
        )
    _needs_torch_triton("local", found)


def _check_interpreter(found: backends.Backends, in_process: bool) -> None:
    _needs_torch_triton("interpreter", found)
    if not found.interpreter:
        raise UsageError("Triton's CPU interpreter needs numpy: pip install numpy")


def _check_modal(found: backends.Backends, in_process: bool) -> None:
    if in_process:  # the Modal function's body in this process: the local GPU or the interpreter
        _needs_torch_triton("modal", found)
        return
    if not found.modal_installed:
        raise UsageError("the modal backend needs the modal package: pip install modal")
    if found.modal_credentials is None:
        raise UsageError(
            "no Modal credentials: run `modal setup` (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET)"
        )


def _local_runner(ctx: RunContext) -> Runner:
    from fibtui.runners.local import LocalRunner, worker_pool

    return LocalRunner(
        ctx.folder,
        ctx.header,
        ctx.definition.raw,
        ctx.solutions,
        ctx.workloads,
        worker_pool(ctx.header.backend, ctx.found, ctx.config, ctx.options),
    )


def _modal_runner(ctx: RunContext) -> Runner:
    from fibtui.runners.modal_runner import modal_runner_for

    return modal_runner_for(
        ctx.ws, ctx.folder, ctx.header, ctx.definition, ctx.solutions, ctx.workloads, ctx.config
    )


def _modal_engine(found: backends.Backends, options: Any) -> str:
    """On Modal the container's GPU runs it; in-process, the local GPU or, without one, Triton's
    CPU interpreter."""
    if getattr(options, "modal_in_process", False) and not found.gpu:
        return "interpreter"
    return "modal"


def _modal_settings(ws: Any, options: Any, config: dict[str, Any]) -> dict[str, Any]:
    from fibtui.runners.modal_runner import modal_header_settings

    return modal_header_settings(ws, options, config)


def _modal_plan(ws: Any, options: Any) -> Any:
    from fibtui.runners.modal_runner import plan_modal

    return plan_modal(ws, options)


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "local",
            "GPU, default when one is present",
            _check_local,
            _local_runner,
            lambda found, options: "local",
        ),
        Backend(
            "interpreter",
            "CPU, Triton's interpreter",
            _check_interpreter,
            _local_runner,
            lambda found, options: "interpreter",
        ),
        Backend(
            "modal",
            "B200 containers",
            _check_modal,
            _modal_runner,
            _modal_engine,
            header_settings=_modal_settings,
            plan=_modal_plan,
            billed=True,
        ),
    )
}


def default_backend(found: backends.Backends | None = None) -> str:
    """The backend a run takes when none is named (``fibtui run``; the TUI's g, s and watch mode):
    the GPU when this machine shows one, else the CPU interpreter. ``found``: what
    ``backends.detect()`` found; without it, detected here (nvidia-smi: up to 5 s, so the TUI
    calls this from a worker)."""
    found = found if found is not None else backends.detect()
    return "local" if found.gpu else "interpreter"


def names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def get(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise UsageError(
            f"unknown backend {name!r} (choose from {', '.join(BACKENDS)}; parity has its own verb)"
        ) from None


def help_text() -> str:
    """``--backend``'s help: each backend and its summary, and ``auto``."""
    return " | ".join(f"{b.name} ({b.summary})" for b in BACKENDS.values()) + (
        " | auto (this machine's backend, then Modal's B200 for what its GPU cannot run: "
        "fibtui.runners.split)"
    )


def with_plan() -> list[str]:
    return [b.name for b in BACKENDS.values() if b.plan is not None]
