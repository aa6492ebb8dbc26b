"""The ``local`` (this machine's GPU) and ``interpreter`` (Triton's CPU interpreter) backends: both
run :class:`fibtui.runners.local.LocalRunner`, its workers on this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fibtui.core import backends
from fibtui.core.errors import UsageError
from fibtui.runners.registry import Backend, Option, RunContext, needs_torch_triton, register

if TYPE_CHECKING:
    from fibtui.runners.events import Runner

#: both backends' workers may come from the worker service (``fibtui workers``)
NO_DAEMON = Option(
    "--no-daemon",
    "local/interpreter: start this run's own workers and leave the worker service alone "
    "(default: take a ready worker from it, starting it when none runs; `fibtui workers`)",
    label="own workers (leave the worker service alone)",
    run_option=False,
)


def _check_local(found: backends.Backends, in_process: bool) -> None:
    if not found.gpu:
        raise UsageError(
            "no NVIDIA GPU on this machine: use --backend interpreter (Triton's CPU interpreter) "
            "or --backend modal"
        )
    needs_torch_triton("local", found)


def _check_interpreter(found: backends.Backends, in_process: bool) -> None:
    needs_torch_triton("interpreter", found)
    if not found.interpreter:
        raise UsageError("Triton's CPU interpreter needs numpy: pip install numpy")


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


def _engine_local(found: backends.Backends, options: Any) -> str:
    return "local"


def _engine_interpreter(found: backends.Backends, options: Any) -> str:
    return "interpreter"


LOCAL = register(
    Backend(
        "local",
        "GPU, default when one is present",
        _check_local,
        _local_runner,
        _engine_local,
        options=(NO_DAEMON,),
        timing_kind="cupti",
        runs_here=True,
        adaptive=True,
    )
)

INTERPRETER = register(
    Backend(
        "interpreter",
        "CPU, Triton's interpreter",
        _check_interpreter,
        _local_runner,
        _engine_interpreter,
        options=(NO_DAEMON,),
        timing_kind="cpu-interpreter",
        runs_here=True,
        l2_policy=False,
        adaptive=True,
    )
)
