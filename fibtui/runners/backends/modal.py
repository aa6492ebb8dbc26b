"""The ``modal`` backend: B200 containers on Modal (:mod:`fibtui.runners.modal_runner`), billed,
with a plan and a cost guard; ``--modal-in-process`` runs the Modal function's body here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fibtui.core import backends
from fibtui.core.errors import UsageError
from fibtui.runners.registry import Backend, Option, RunContext, needs_torch_triton, register

if TYPE_CHECKING:
    from fibtui.runners.events import Runner

#: run the Modal function's body in this process (Function.local()), on the local GPU or Triton's
#: CPU interpreter: for tests and for checking the path offline (``RunOptions.modal_in_process``)
IN_PROCESS = Option("--modal-in-process", "", hidden=True)

#: the cost guard's way through
YES = Option(
    "--yes",
    "modal: start even when the worst case costs more than [modal] confirm_above_usd",
    run_option=False,
)


def _check(found: backends.Backends, in_process: bool) -> None:
    if in_process:  # the Modal function's body in this process: the local GPU or the interpreter
        needs_torch_triton("modal", found)
        return
    if not found.modal_installed:
        raise UsageError("the modal backend needs the modal package: pip install modal")
    if found.modal_credentials is None:
        raise UsageError(
            "no Modal credentials: run `modal setup` (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET)"
        )


def _runner(ctx: RunContext) -> Runner:
    from fibtui.runners.modal_runner import modal_runner_for

    return modal_runner_for(
        ctx.ws, ctx.folder, ctx.header, ctx.definition, ctx.solutions, ctx.workloads, ctx.config
    )


def _in_process(options: Any) -> bool:
    return bool(getattr(options, "modal_in_process", False))


def _resumed_in_process(settings: dict[str, Any]) -> bool:
    return bool((settings.get("modal") or {}).get("in_process"))


def _engine(found: backends.Backends, options: Any) -> str:
    """On Modal the container's GPU runs it; in-process, the local GPU or, without one, Triton's
    CPU interpreter."""
    if _in_process(options) and not found.gpu:
        return "interpreter"
    return "modal"


def _settings(ws: Any, options: Any, config: dict[str, Any]) -> dict[str, Any]:
    from fibtui.runners.modal_runner import modal_header_settings

    return modal_header_settings(ws, options, config)


def _plan(ws: Any, options: Any) -> Any:
    from fibtui.runners.modal_runner import plan_modal

    return plan_modal(ws, options)


def _rerun_cost(ws: Any, run_id: str, retry: bool) -> Any:
    from fibtui.runners.modal_runner import rerun_cost

    return rerun_cost(ws, run_id, retry)


MODAL = register(
    Backend(
        "modal",
        "B200 containers",
        _check,
        _runner,
        _engine,
        header_settings=_settings,
        plan=_plan,
        plan_help="print the plan (containers, GPU, image, volume, estimated GPU-seconds and "
        "cost) and exit; no network",
        billed=True,
        rerun_cost=_rerun_cost,
        options=(IN_PROCESS, YES),
        timing_kind="cupti",
        in_process=_in_process,
        resumed_in_process=_resumed_in_process,
    )
)
