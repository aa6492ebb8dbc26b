"""``fibtui ncu profile --backend modal``: Nsight Compute in a Modal container.

The client builds the same ncu command line as a local profile (:func:`fibtui.runners.ncu.
build_ncu_command`, with ``--profile-from-start off`` around the worker's profiled calls) and the
same page exports, and sends them with the worker's profile request to one call of
:func:`fibtui.runners.modal_app.profile_slice` on the configured GPU and image. The report and its
pages come back as bytes and text and are written where a local profile writes them
(``optimize_ops/benchmarks/ncu/``), so they are imported and diffed like a local one.

The ncu in the image must read the GPU's counters (a version that knows the B200: Nsight Compute
2025.1 or later; ``[modal] image``/``pip`` choose it). A container that may not read them
(``ERR_NVGPUCTRPERM``) answers at once, nothing else runs, and the error is one line.

One call costs at most its startup timeout, its ``--timeout`` (the call's Modal timeout) and the
scale-down window at the container rate; above ``[modal] confirm_above_usd`` it needs ``--yes``.
The live call cannot run on a machine without Modal's network and credentials; it is tested
against tests/modal_servicer.py with a stand-in ncu.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibtui.core.errors import FibError, UsageError
from fibtui.core.fsio import atomic_write_bytes, atomic_write_text, make_dirs

if TYPE_CHECKING:
    from fibtui.core.workspace import Workspace
    from fibtui.runners.ncu import ProfileResult

#: what the container's own Python is called in the command lines sent to it
PYTHON = "{python}"


class NcuOnModalFailed(FibError):
    exit_code = 1


def profile_cost(ws: Workspace, timeout_s: float) -> tuple[float, float]:
    """(worst case USD, confirm_above_usd) of one profile call."""
    from fibtui.runners.modal_runner import (
        container_rate_usd_per_hour,
        modal_settings,
        worst_case_container_seconds,
    )

    s = modal_settings(ws.root)
    seconds = worst_case_container_seconds(
        1, max(10.0, timeout_s), s.startup_timeout_s, s.scaledown_window_s
    )
    return seconds / 3600.0 * container_rate_usd_per_hour(s), s.confirm_above_usd


def profile_on_modal(
    ws: Workspace,
    request: dict[str, Any],
    rep: Path,
    *,
    kernel_regex: str | None,
    launch_skip: int,
    launch_count: int | None,
    section_set: str,
    clock_control: str,
    timeout_s: float,
    say: Callable[[str], None],
    handles: Any = None,
    container_paths: bool = True,
) -> ProfileResult:
    """Profile on Modal into ``rep`` and its sibling pages; returns what a local profile returns."""
    from fibtui.runners import modal_app
    from fibtui.runners.modal_runner import (
        CONTAINER_BUILD_DIR,
        CONTAINER_CACHE_DIR,
        MOUNT_PATH,
        modal_settings,
        volume_files_for,
    )
    from fibtui.runners.ncu import ProfileResult, build_ncu_command, sibling_paths

    settings = modal_settings(ws.root)
    request = dict(request)
    files = []
    if container_paths:
        config = dict(request["config"])
        local_root = Path(config["dataset_root"])
        volume_dir = settings.volume_dir or local_root.name
        files = volume_files_for(
            local_root, {w["uuid"]: w for w in request["workloads"]}, volume_dir
        )
        config.update(
            dataset_root=f"{MOUNT_PATH}/{volume_dir}",
            cache_dir=CONTAINER_CACHE_DIR,
            build_cache_dir=CONTAINER_BUILD_DIR,
        )
        request["config"] = config
    argv = build_ncu_command(
        [PYTHON, "-m", "fibtui.worker", "profile", "--request", "{request}"],
        "{report}",
        kernel_regex=kernel_regex,
        launch_skip=launch_skip,
        launch_count=launch_count,
        section_set=section_set,
        clock_control=clock_control,
        ncu="ncu",
        profile_from_start=False,
    )
    exports = {
        "details_csv": ["ncu", "--import", "{report}", "--csv", "--page", "details"],
        "raw_csv": ["ncu", "--import", "{report}", "--csv", "--page", "raw"],
        "details_txt": ["ncu", "--import", "{report}", "--page", "details"],
    }
    if handles is None:
        handles = modal_app.build_app(
            app_name=f"{settings.app_name}-ncu",
            gpu=settings.gpu,
            image_ref=settings.image,
            timeout_s=timeout_s,
            volume_name=settings.volume if files else None,
            mount_path=MOUNT_PATH,
            add_python=settings.add_python,
            pip=settings.pip,
            max_containers=1,
            cpu=settings.cpu,
            memory_mb=settings.memory_mb,
            startup_timeout_s=settings.startup_timeout_s,
            scaledown_window_s=settings.scaledown_window_s,
            profile_timeout_s=timeout_s + 120.0,  # ncu's own timeout in the container, then exports
        )
    say(f"profiling on Modal ({settings.gpu}, {settings.image}): one call")
    with handles.app.run():
        if files and handles.volume is not None:
            missing = [f for f in files if f.size is None]
            if missing:
                raise UsageError(
                    f"{missing[0].local}: safetensors file referenced by a workload is missing"
                )
            dirs = sorted({"/" + f.remote.strip("/").split("/")[0] for f in files})
            present = modal_app.volume_listing(handles.volume, dirs)
            todo = [(Path(f.local), f.remote) for f in files if present.get(f.remote) != f.size]
            modal_app.upload_files(handles.volume, todo, say)
        out = handles.profile.remote(
            {"profile": request, "ncu_argv": argv, "exports": exports, "timeout_s": timeout_s}
        )
    if out.get("error") == modal_app.NCU_NO_PERMISSION:
        raise NcuOnModalFailed(
            "the Modal container may not read the GPU's performance counters (ERR_NVGPUCTRPERM): "
            "ncu cannot profile there; the call stopped at once"
        )
    paths = sibling_paths(rep)
    make_dirs(rep.parent)
    atomic_write_text(paths["log"], str(out.get("log") or ""))
    if out.get("error"):
        raise NcuOnModalFailed(f"ncu on Modal: {out['error']} (log: {paths['log']})")
    atomic_write_bytes(rep, out["report"])
    pages = out.get("pages") or {}
    for name in ("details_csv", "raw_csv", "details_txt"):
        atomic_write_text(paths[name], str(pages.get(name) or ""))
    return ProfileResult(
        rep, paths["details_csv"], paths["raw_csv"], paths["details_txt"], paths["log"], argv
    )
