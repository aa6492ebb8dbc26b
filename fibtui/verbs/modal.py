"""``fibtui modal doctor``: the first live check for a new Modal user (fibtui.runners.modal_doctor).

``--json`` prints ``ok``, ``checks`` (each ``name``, ``ok``, ``detail``), ``probe`` (what the
container said), ``run_id`` (the 1-workload gate), ``container_seconds``, ``cost_usd`` and
``worst_case_cost_usd``. Exit 0 when every check passed, 1 when one failed, 2 when the worst case
is above ``[modal] confirm_above_usd`` and ``--yes`` was not given (nothing launched).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser("modal", help="Modal: check the set-up with one tiny B200 call")
    msub = p.add_subparsers(
        dest="modal_verb", metavar="ACTION", required=True, parser_class=type(p)
    )
    dp = msub.add_parser(
        "doctor",
        help="check the modal client, credentials, image, GPU, driver vs CUDA and a 1-workload "
        "gate on one B200 call, and say what it cost (run it first)",
    )
    common(dp)
    dp.add_argument("--json", action="store_true")
    dp.add_argument(
        "--yes",
        action="store_true",
        help="start even when the worst case is above confirm_above_usd",
    )
    dp.add_argument(
        "--local", action="store_true", help="only the checks of this machine (no network, free)"
    )
    dp.set_defaults(func=doctor)


def doctor(args: argparse.Namespace) -> int:
    from fibtui.core.errors import UsageError
    from fibtui.runners import modal_doctor
    from fibtui.runners.modal_runner import modal_settings
    from fibtui.services.runs import prepare_run
    from fibtui.verbs._common import emit_json, workspace_from

    ws = workspace_from(args)
    assert ws is not None
    out = sys.stderr if args.json else sys.stdout

    def say(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    if args.local:
        report = modal_doctor.DoctorReport(
            checks=[modal_doctor.client_check(), modal_doctor.credentials_check()]
        )
        for c in report.checks:
            say(c.line())
    else:
        worst = modal_doctor.doctor_worst_case(ws)
        limit = modal_settings(ws.root).confirm_above_usd
        say(f"fibtui modal doctor: at most ${worst:.2f} (worst case), usually cents")
        if worst > limit and not args.yes:
            raise UsageError(
                f"the doctor's worst case (${worst:.2f}) is above [modal] confirm_above_usd "
                f"(${limit:.2f}): nothing was launched; rerun with --yes"
            )
        report = modal_doctor.run_doctor(ws, say, prepare=prepare_run)
    if args.json:
        emit_json(report.to_json())
    return 0 if report.ok else 1
