"""Send what this GPU could not run to one that can, in the same run: the jobs of a run that are
UNSUPPORTED_HERE because the GPU lacks the architecture their code needs (fibtui.core.gpuarch:
a Blackwell kernel on a Hopper GPU), run again on Modal's B200 when it has that architecture.

``fibtui run --backend auto`` runs a new run on this machine's backend and then sends what it
could not run; ``fibtui run --send-unsupported RUN_ID`` sends them for an existing run; the TUI
offers the same after a run (one dialog with the plan and the cost). What is sent is every job
of each (workload, repeat) that had such a row, of every solution, so a paired comparison never
pairs rows of two devices: both arms of a sent workload are measured on the B200, the others stay
where they ran. The journal gets a ``retry`` line for those jobs (reason "sent to Modal's
B200: ...") and the Modal runner runs what is then pending, journaling every result the way the
local runner does: one run record, each row naming its device (``timing.environment.gpu``). An
interrupted send is sent again by the same command: the pending jobs of a workload that was sent
go with it.

The cost is Modal's worst case over those jobs (fibtui.runners.modal_runner.cost_of_jobs, the
same bound as every Modal run); above ``[modal] confirm_above_usd`` nothing starts without
``--yes`` (the TUI asks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fibtui.core.errors import UsageError
from fibtui.core.gpuarch import B200_ARCH
from fibtui.core.runs import (
    Journal,
    NotJudged,
    build_record,
    not_judged,
    read_journal,
    run_dir,
)
from fibtui.core.workspace import Workspace

#: the reason written on a send's retry line (and how an interrupted send is found again)
SEND_REASON = "sent to Modal's B200"


@dataclass(frozen=True)
class Send:
    """What a send would run: the groups of arch-limited jobs a B200 has what they need for,
    every job of their (workload, repeat) pairs, and Modal's worst case for them."""

    run_id: str
    groups: list[NotJudged]
    keys: list[str]
    workloads: list[str]
    cost: Any  # modal_runner.RunCost
    settings: Any  # modal_runner.ModalSettings

    def lines(self) -> list[str]:
        need = sorted({n for g in self.groups for n in g.needs}) or ["another architecture"]
        out = [
            f"{len(self.workloads)} workload(s) of run {self.run_id} need {' or '.join(need)}: "
            f"{len(self.keys)} job(s) to Modal's B200 ({B200_ARCH}), every solution of each, so "
            "each pair is measured on one GPU"
        ]
        out += self.cost.lines(self.settings)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "groups": [g.to_json() for g in self.groups],
            "jobs": len(self.keys),
            "workloads": self.workloads,
            "worst_case_cost_usd": self.cost.worst_case_cost_usd,
            "confirm_above_usd": self.cost.confirm_above_usd,
            "needs_confirmation": self.cost.needs_confirmation,
        }


def _resent_pending(folder: Path, results: set[str]) -> set[str]:
    """Jobs an earlier send re-opened that have no result yet (an interrupted send)."""
    out: set[str] = set()
    try:
        lines = (
            (folder / "journal.jsonl").read_text(encoding="utf-8", errors="replace").splitlines()
        )
    except OSError:
        return out
    for raw in lines:
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("kind") == "retry":
            if str(obj.get("reason", "")).startswith(SEND_REASON):
                out.update(k for k in obj.get("keys") or [] if isinstance(k, str))
    return out - results


def plan_send(ws: Workspace, run_id: str) -> Send | None:
    """What ``--send-unsupported RUN_ID`` would run, or None when the run has nothing a B200
    could run that this GPU could not. No network, nothing written."""
    from fibtui.runners.modal_runner import cost_of_jobs, modal_settings

    folder = run_dir(ws.archive_root, run_id)
    contents = read_journal(folder / "journal.jsonl")
    record = build_record(folder, contents)
    groups = [g for g in not_judged(record.jobs) if g.kind == "arch" and g.on_b200]
    pending = _resent_pending(folder, set(contents.results))
    sent_pairs = {(j.uuid, j.repeat) for j in record.jobs if _in_groups(j, groups)}
    sent_pairs |= {(j.uuid, j.repeat) for j in contents.header.jobs if j.key in pending}
    if not sent_pairs:
        return None
    keys = [j.key for j in contents.header.jobs if (j.uuid, j.repeat) in sent_pairs]
    settings = modal_settings(ws.root)
    cost = cost_of_jobs(ws, contents.header, set(keys), settings)
    workloads = list(dict.fromkeys(u for u, _ in sorted(sent_pairs, key=lambda p: (p[1], p[0]))))
    return Send(run_id, groups, keys, workloads, cost, settings)


def _in_groups(job: Any, groups: list[NotJudged]) -> bool:
    return any(job.uuid in g.uuids and job.solution in g.solutions for g in groups) and (
        job.status == "UNSUPPORTED_HERE"
    )


def prepare_send(ws: Workspace, send: Send, modal_in_process: bool = False) -> Any:
    """Re-open the send's jobs in the run's journal and return a PreparedRun whose runner is
    Modal's, for those jobs (and any other job the run has pending)."""
    from fibtui.core import backends
    from fibtui.core.plan import load_snapshot
    from fibtui.runners.modal_runner import (
        ModalRunner,
        ModalSettings,
        modal_header_settings,
        volume_files_for,
    )
    from fibtui.runners.session import PreparedRun, RunOptions, engine_config, workload_json

    if not modal_in_process:
        found = backends.detect(probe_gpu=False)
        if not found.modal_installed:
            raise UsageError("sending to Modal's B200 needs the modal package: pip install modal")
        if found.modal_credentials is None:
            raise UsageError(
                "sending to Modal's B200 needs Modal credentials: run `modal setup` (or set "
                f"MODAL_TOKEN_ID and MODAL_TOKEN_SECRET), then fibtui run --send-unsupported {send.run_id}"
            )
    folder = run_dir(ws.archive_root, send.run_id)
    contents = read_journal(folder / "journal.jsonl")
    header = contents.header
    dataset = ws.dataset()
    definition = dataset.definition(header.definition)
    uuids = list(dict.fromkeys(j.uuid for j in header.jobs))
    workloads = workload_json(dataset, definition, uuids)
    options = RunOptions(backend="modal", modal_in_process=modal_in_process)
    config = engine_config(
        "interpreter" if modal_in_process else "modal",
        definition,
        ws.dataset_root or dataset.root,
        options,
    )
    info = modal_header_settings(ws, options, config)
    settings = ModalSettings.from_json(info)
    local_root = Path(info.get("local_dataset_root") or ws.dataset_root or dataset.root)
    files = (
        []
        if modal_in_process
        else volume_files_for(local_root, workloads, settings.volume_dir or local_root.name)
    )
    solutions = {ref.key: load_snapshot(folder, ref) for ref in header.solutions}
    Journal(folder).append_retry(
        send.keys, f"{SEND_REASON}: {', '.join(sorted({n for g in send.groups for n in g.needs}))}"
    )
    runner = ModalRunner(
        folder,
        header,
        definition.raw,
        solutions,
        workloads,
        config,
        settings,
        settings.workers,
        in_process=modal_in_process,
        volume_files=files,
    )
    return PreparedRun(folder, header, runner)
