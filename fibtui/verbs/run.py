"""``fibtui run`` (start or resume a run) and ``fibtui runs list``.

``fibtui run --json`` prints the final run record: ``run_id``, ``backend``, ``timing_kind``,
``l2_policy``, ``state``, ``jobs`` (each ``uuid``, ``axes``, ``solution``, ``role``, ``repeat``,
``status``, ``latency_ms``, ``reference_latency_ms``, ``speedup``, ``max_abs_error``,
``max_rel_error``, ``error``, ``timing``) and ``summary`` (``total``, ``done``, ``passed``,
``failed``, ``complete``, ``per_solution``, ``planned``, ``skipped``), ``adaptive`` (adaptive runs:
``plan``, ``stopped``, ``reason``, ``workloads``: uuid -> ``repeats``, ``reason``, ``detail``,
``look``), ``comparison`` (a paired run: what ``fibtui compare RUN_ID --json`` prints, else
null) and ``clock_notes`` (GPU runs: whether the clocks were locked as the official evaluator's
are, and blocks that ran throttled; fibtui.core.clocks). Live progress goes to stderr when
``--json`` is given.

``--timing official`` also times every PASSED job as flashinfer-bench main does (its method in
``fibtui.worker.official_timing``) into each job's ``timing.official`` (``latency_ms``,
``trial_medians_ms``, ``reference_latency_ms``, ``speedup``, ``warmup``, ``iterations``,
``trials``); the verdict stays fibtui's own timing's, and ``fibtui compare RUN --timing official``
decides on the official-equivalent latencies instead.

``--adaptive`` (paired runs, local or interpreter): ``--repeats N`` is the cap (default 10); after
each pass a workload gets another repeat only while its paired interval is undecided, and the run
stops once its verdict is (docs/measurement.md, "Adaptive repeats"). ``summary.total`` then counts
the jobs that ran or will; ``planned`` is the cap's, ``skipped`` the difference.
``fibtui run --backend modal --plan [--json]`` prints what a Modal run would do and cost, with no
network (:func:`fibtui.runners.modal_runner.plan_modal`).

SIGINT (Ctrl-C), SIGTERM and SIGHUP (an SSH drop) while a run goes cancel it first; the runner then
stops its workers, the jobs in flight stay pending (never a kernel's failure), the run reads
``interrupted`` and ``fibtui run --resume RUN_ID`` finishes it. The exit code is 128 + the signal's
number (130 for Ctrl-C). A second signal stops at once (the workers are killed, still nothing is
recorded for the jobs in flight).

Test-only environment variables (they only slow the CLI down, for tests that must land a signal in
a given phase): ``FIBTUI_TEST_SLOW_EXIT_S`` makes ``fibtui run`` linger that many seconds before it
returns; ``FIBTUI_TEST_PAUSE_AFTER_JOB_S`` makes the progress printer linger after each finished
job's line, between that job and the next.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from types import TracebackType

    from fibtui.core.runs import RunRecord
    from fibtui.core.stats import CompareOutcome
    from fibtui.core.workspace import Workspace
    from fibtui.runners.service.client import ServiceWorkers
    from fibtui.services.runs import PreparedRun, RunOptions
    from fibtui.verbs._common import CancelOnSignals, Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser(
        "run", help="run a gate or a sweep (local GPU, the CPU interpreter, or Modal)"
    )
    common(p)
    from fibtui.runners import registry

    p.add_argument(
        "--backend",
        default=None,
        choices=None,
        metavar="|".join((*registry.names(), "auto")),
        help=registry.help_text(),
    )
    p.add_argument("--plan", action="store_true", help=registry.plan_help())
    p.add_argument(
        "--workloads",
        default="rep",
        metavar="rep|quick|all|UUID,...",
        help="representatives (default), the quick gate (as --quick), every workload, or a list "
        "of uuids (unique prefixes work)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="the TUI's quick correctness gate: the smallest workload of each band, capped by an "
        "estimated time (20 s); the workloads left out are named",
    )
    p.add_argument(
        "--solution",
        action="append",
        default=[],
        metavar="DIR",
        help="candidate: a folder with config.toml, a solution.json, or a folder of sources "
        "(default: the workspace's solution); repeat for several",
    )
    p.add_argument(
        "--baseline",
        metavar="DIR|best",
        help="baseline to pair with, timed in the same process, interleaved ('best': the promoted best snapshot)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        metavar="N",
        help="repeats of every workload (default 1); with --adaptive, the most (default 10)",
    )
    p.add_argument(
        "--adaptive",
        action="store_true",
        help="paired runs: repeat a workload only while its paired interval is undecided, and stop "
        "once the verdict is (a sequential rule that keeps the error rate; docs/measurement.md)",
    )
    p.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted run from its journal")
    p.add_argument(
        "--send-unsupported",
        metavar="RUN_ID",
        help="run the jobs of a run that this GPU could not (UNSUPPORTED_HERE: they need another "
        "architecture, e.g. sm_100a) on Modal's B200, in the same run, every solution of each "
        "workload (the plan and its worst-case cost first; --plan shows them only)",
    )
    p.add_argument(
        "--retry-failed",
        metavar="RUN_ID",
        help="run the failed jobs of a run again, merged back into it",
    )
    p.add_argument(
        "--definition", metavar="NAME", help="the definition to run (per-definition workspaces)"
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="GPUs to use (local), interpreter worker processes, or Modal containers",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="per-job timeout in seconds (modal: per container call)",
    )
    p.add_argument(
        "--l2",
        choices=("cold", "warm"),
        default="cold",
        help="L2 policy between launches (default cold)",
    )
    p.add_argument(
        "--timing",
        choices=("fibtui", "official"),
        default="fibtui",
        help="official: also time every job as flashinfer-bench main does (CUPTI per call, a "
        "2 x L2 zero-fill before each, warm-up 10, 50 iterations, 3 trials), beside fibtui's own "
        "timing, which still decides (docs/measurement.md, Official-equivalent timing)",
    )
    p.add_argument(
        "--no-profile-baseline",
        dest="profile_baseline",
        action="store_false",
        help="with --timing official: leave the reference untimed, as flashinfer-bench's own "
        "--no-profile-baseline (no official speedup; for a definition whose reference is slow)",
    )
    p.add_argument("--calls-per-block", type=int, metavar="N")
    p.add_argument("--blocks", type=int, metavar="N")
    p.add_argument("--json", action="store_true", help="print the final run record as JSON")
    for option in registry.options():  # each backend's own flags (fibtui.runners.backends)
        option.add_to(p)
    p.set_defaults(func=run)

    p = sub.add_parser("runs", help="list runs and their state")
    rsub = p.add_subparsers(dest="runs_verb", metavar="ACTION", required=True, parser_class=type(p))
    lp = rsub.add_parser("list", help="every run under optimize_ops/runs with its state")
    common(lp)
    lp.add_argument("--json", action="store_true")
    lp.set_defaults(func=runs_list)


def run(args: argparse.Namespace) -> int:
    from fibtui.core.plan import check_workers
    from fibtui.runners.registry import default_backend
    from fibtui.services.runs import RunOptions, prepare_resume, prepare_retry, prepare_run
    from fibtui.verbs._common import workspace_from

    check_workers(args.workers)  # every backend, before anything is read
    ws = workspace_from(args)
    assert ws is not None
    auto = args.backend == "auto"
    if auto:
        # this machine's backend first; what its GPU cannot run goes to Modal's B200 after
        args.backend = default_backend()
    if args.baseline == "best":
        from fibtui.core.errors import UsageError
        from fibtui.services.archive import best_solution_path

        best = best_solution_path(ws.archive_root, ws.config_for(args.definition).language)
        if best is None:
            raise UsageError(
                "--baseline best: nothing was promoted in this workspace yet (optimize_ops/best_solution_*)"
            )
        args.baseline = str(best)
    from fibtui.core.sequential import DEFAULT_CAP

    if args.quick:
        if args.workloads not in ("rep", "quick"):
            from fibtui.core.errors import UsageError

            raise UsageError("--quick picks the workloads: it goes without --workloads")
        args.workloads = "quick"
    options = RunOptions(
        backend=args.backend or default_backend(),
        workloads=args.workloads,
        solutions=list(args.solution),
        baseline=args.baseline,
        repeats=args.repeats if args.repeats is not None else (DEFAULT_CAP if args.adaptive else 1),
        adaptive=args.adaptive,
        workers=args.workers,
        job_timeout_s=args.timeout,
        l2_policy=args.l2,
        timing=args.timing,
        profile_baseline=args.profile_baseline,
        calls_per_block=args.calls_per_block,
        blocks=args.blocks,
        definition=args.definition,
    )
    _backend_options(args, options)
    if args.send_unsupported:
        return _send(args, ws, args.send_unsupported)
    if args.plan:
        return _plan(args, ws, options)
    from fibtui.runners.service.client import service_workers

    service = service_workers(
        ws.root, no_daemon=_flag(args, "no_daemon")
    )  # a bad setting stops it here
    if args.resume:
        _resume_cost_guard(args, ws, args.resume, retry=False)
        prepared = prepare_resume(ws, args.resume, options if args.backend else None)
    elif args.retry_failed:
        _resume_cost_guard(args, ws, args.retry_failed, retry=True)
        prepared = prepare_retry(ws, args.retry_failed, options if args.backend else None)
    else:
        options.representatives = _representatives(ws, options)
        from fibtui.runners import registry

        spec = registry.get(options.backend)
        if spec.billed and not spec.in_process(options):
            _cost_guard(args, ws, options)
        prepared = prepare_run(ws, options)
    _use_worker_service(prepared, service)
    code, signalled = _run_under_signals(
        args, prepared, "the run; the job(s) in flight stay pending (resumable)"
    )
    if auto and code < 128 and not signalled:
        return _send(args, ws, prepared.run_id, after_run=code)
    return code


def _flag(args: argparse.Namespace, dest: str) -> bool:
    """A backend's switch (fibtui.runners.backends), off where no backend declares it."""
    return bool(getattr(args, dest, False))


def _backend_options(args: argparse.Namespace, options: RunOptions) -> None:
    """Each backend option's value into the run's options: its RunOptions attribute, else
    ``options.backend_options``."""
    from fibtui.runners import registry

    for option in registry.options():
        if not option.run_option or not hasattr(args, option.dest):
            continue
        value = getattr(args, option.dest)
        if hasattr(options, option.dest):
            setattr(options, option.dest, value)
        else:
            options.backend_options[option.dest] = value


def _run_under_signals(
    args: argparse.Namespace, prepared: PreparedRun, what: str
) -> tuple[int, bool]:
    """Run and report, a signal cancelling as an interrupt (set before the runner stops any
    worker, so a job in flight stays pending and the run reads interrupted; a second one stops
    the workers at once). The exit code, and whether a signal came."""
    from fibtui.runners.journaling import interrupt
    from fibtui.verbs._common import CancelOnSignals

    printer = _Printer(stream=sys.stderr if args.json else sys.stdout)
    cancel = threading.Event()
    recorder = getattr(prepared.runner, "recorder", None)
    with CancelOnSignals(
        cancel, what, stop=lambda name: interrupt(cancel, f"{name} received", recorder)
    ) as stop:
        try:
            code = _run_and_report(args, prepared, printer, cancel, stop)
        finally:
            _test_delay("FIBTUI_TEST_SLOW_EXIT_S")
    return code, stop.received is not None


def _send(
    args: argparse.Namespace, ws: Workspace, run_id: str, after_run: int | None = None
) -> int:
    """``--send-unsupported RUN_ID`` (and the second half of ``--backend auto``): what the run's
    GPU could not run, on Modal's B200, in the same run (fibtui.runners.split). ``after_run``:
    the exit code of the run just made (auto), kept when nothing is sent."""
    from fibtui.core.errors import UsageError
    from fibtui.runners.split import plan_send, prepare_send
    from fibtui.verbs._common import emit_json

    send = plan_send(ws, run_id)
    out = sys.stderr if args.json or after_run is not None else sys.stdout
    if send is None:
        if after_run is None:
            out.write(f"run {run_id} has no job a B200 could run that its GPU could not\n")
        return after_run if after_run is not None else 0
    for line in send.lines():
        out.write(line + "\n")
    if args.plan:
        if args.json:
            emit_json(send.to_json())
        return 0
    try:
        in_process = _flag(args, "modal_in_process")
        if send.cost.needs_confirmation and not _flag(args, "yes") and not in_process:
            raise UsageError(
                f"the worst case of sending {len(send.keys)} job(s) to Modal costs about "
                f"${send.cost.worst_case_cost_usd:.2f}, more than [modal] confirm_above_usd "
                f"(${send.cost.confirm_above_usd:.2f}): nothing was sent; fibtui run "
                f"--send-unsupported {run_id} --yes sends them"
            )
        prepared = prepare_send(ws, send, modal_in_process=in_process)
    except UsageError as exc:
        if after_run is None:
            raise
        # --backend auto: the run itself stands; what was not sent is said, and how to send it
        out.write(f"not sent: {exc}\n")
        return after_run
    return _run_under_signals(
        args, prepared, "the send; the job(s) in flight stay pending (send again to finish)"
    )[0]


def _use_worker_service(prepared: PreparedRun, service: ServiceWorkers | None) -> None:
    """A local or interpreter run takes its workers from the worker service (started on first
    use) unless ``--no-daemon``, ``[workers] daemon = false`` or ``FIBTUI_WORKERS_DAEMON=0``
    (then ``service`` is None and the run starts its own, as before)."""
    from fibtui.runners.local import LocalRunner

    runner = prepared.runner
    if service is not None and isinstance(runner, LocalRunner) and runner.warm is None:
        # ServiceWorkers offers WarmWorkers' take/prewarm/count/close; LocalRunner.warm is
        # declared as WarmWorkers (fibtui/runners/local.py): a shared protocol there would say so
        runner.warm = service  # type: ignore[assignment]


def _run_and_report(
    args: argparse.Namespace,
    prepared: PreparedRun,
    printer: _Printer,
    cancel: threading.Event,
    stop: CancelOnSignals,
) -> int:
    from fibtui.verbs._common import emit_json

    try:
        record = prepared.runner.run(printer, cancel)
    except KeyboardInterrupt:
        # a second signal (or Ctrl-C outside the handlers): the runner cancelled first, then
        # stopped its workers; the jobs in flight stay pending
        record = None
    # a signal that came after the last job leaves nothing to resume: the run's own outcome counts
    stopped = record is None or (
        stop.received is not None and record.summary.done < record.summary.total
    )
    with _quiet_if(stop.received is not None):  # after SIGHUP the terminal may be gone
        if record is not None:
            outcome = _verdict(args, record)
            from fibtui.core.clocks import clock_notes

            clocks = clock_notes(record.jobs)
            if args.json:
                from fibtui.core.runs import not_judged

                emit_json(
                    {
                        **record.to_json(),
                        "comparison": outcome.to_json() if outcome is not None else None,
                        "clock_notes": clocks,
                        "not_judged": [g.to_json() for g in not_judged(record.jobs)],
                    }
                )
            else:
                printer.summary(record)
                from rich.markup import escape

                for note in clocks:
                    printer.con.print(f"  [yellow]{escape(note)}[/]")
                if outcome is not None:
                    from fibtui.verbs.compare import print_verdict

                    print_verdict(printer.con, outcome)
        if stopped:
            sys.stderr.write(f"\ninterrupted: resume with  fibtui run --resume {prepared.run_id}\n")
            sys.stderr.flush()
    if stopped:
        return 128 + int(stop.received or signal.SIGINT)
    assert record is not None
    return run_exit_code(record)


def run_exit_code(record: RunRecord) -> int:
    """0: every job PASSED; 3: nothing failed, but some jobs could not be judged on this
    machine (UNSUPPORTED_HERE: another GPU architecture, headers, a tool); 1: otherwise."""
    from fibtui.core.status import PASSED, is_tool_limit

    if record.summary.complete:
        return 0
    s = record.summary
    if s.done == s.total and all(
        j.status == PASSED or is_tool_limit(j.status) for j in record.jobs
    ):
        return 3
    return 1


def _verdict(args: argparse.Namespace, record: RunRecord) -> CompareOutcome | None:
    """The paired verdict of a finished paired run, or None (fibtui.services.decide.run_verdict)."""
    from fibtui.services import decide
    from fibtui.verbs._common import workspace_from

    ws = workspace_from(args)
    return decide.run_verdict(ws, record) if ws is not None else None


class _quiet_if:
    """Swallow a failed write to a terminal that went away (after SIGHUP)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        return self.quiet and kind is not None and issubclass(kind, (OSError, ValueError))


def _test_delay(name: str) -> None:
    """Test-only (see the module's docstring): sleep as many seconds as the variable ``name`` says."""
    delay = os.environ.get(name)
    if delay:
        try:
            seconds = float(delay)
        except ValueError:
            return
        if seconds > 0:
            time.sleep(seconds)


def _plan(args: argparse.Namespace, ws: Workspace, options: RunOptions) -> int:
    """``--plan``: what a Modal run would cost, without any network."""
    from fibtui.core.errors import UsageError
    from fibtui.runners import registry
    from fibtui.verbs._common import console, emit_json

    planner = registry.get(options.backend).plan
    if planner is None or args.resume:
        raise UsageError(
            f"--plan goes with --backend {' or '.join(registry.with_plan())} (and a new run, not --resume)"
        )
    options.representatives = _representatives(ws, options)
    plan = planner(ws, options)
    if args.json:
        emit_json(plan.to_json())
    else:
        from rich.markup import escape

        con = console()
        for line in plan.lines():
            con.print(escape(line), soft_wrap=True)
    return 0


def _cost_guard(args: argparse.Namespace, ws: Workspace, options: RunOptions) -> None:
    """A Modal run whose worst case (every job hanging until its timeout) costs more than
    ``[modal] confirm_above_usd`` starts only with ``--yes``; without it the plan is printed and
    nothing is launched (exit 2)."""
    from fibtui.core.errors import UsageError
    from fibtui.runners import registry

    planner = registry.get(options.backend).plan
    if planner is None:  # a billed backend without a plan cannot say what it costs: never guess
        raise UsageError(
            f"the {options.backend} backend is billed but has no --plan to check its cost"
        )
    plan = planner(ws, options)
    if not plan.needs_confirmation or _flag(args, "yes"):
        return
    for line in plan.lines():
        sys.stderr.write(line + "\n")
    raise UsageError(
        f"the worst case of this Modal run costs about ${plan.worst_case_cost_usd:.2f}, more than "
        f"[modal] confirm_above_usd (${plan.confirm_above_usd:.2f}): nothing was launched; "
        "rerun with --yes to start it"
    )


def _resume_cost_guard(args: argparse.Namespace, ws: Workspace, run_id: str, retry: bool) -> None:
    """--resume and --retry-failed start containers too: the plan's bound over the jobs they would
    run (``modal_runner.run_cost``), checked before anything is written; without --yes nothing is
    launched when it costs more than ``[modal] confirm_above_usd``."""
    from fibtui.core.errors import UsageError
    from fibtui.runners import registry

    found = None
    for spec in registry.all_backends().values():  # the one whose run it is says what it costs
        if spec.rerun_cost is not None and found is None:
            found = spec.rerun_cost(ws, run_id, retry)
    if found is None or _flag(args, "yes"):
        return
    cost, settings = found
    if not cost.needs_confirmation:
        return
    for line in cost.lines(settings):
        sys.stderr.write(line + "\n")
    raise UsageError(
        f"the worst case of {'retrying the failed jobs of' if retry else 'resuming'} run {run_id} "
        f"costs about ${cost.worst_case_cost_usd:.2f}, more than [modal] confirm_above_usd "
        f"(${cost.confirm_above_usd:.2f}): nothing was launched; rerun with --yes to start it"
    )


def _representatives(ws: Workspace, options: RunOptions) -> list[str] | None:
    """Representatives for ``--workloads rep`` from the regime analysis (pins honored); for
    ``--workloads quick`` (``--quick``) the quick gate's workloads (fibtui.core.quick), the ones
    its time budget leaves out named in one line on stderr."""
    if options.workloads == "quick":
        from fibtui.core.quick import quick_gate_for

        # the TUI's g on the CPU interpreter: the smallest workload of each band within the
        # time budget, priced by the past interpreter runs of the definition here
        gate = quick_gate_for(
            ws,
            options.definition,
            solutions=len(options.solutions or [None]) + (1 if options.baseline else 0),
        )
        sys.stderr.write(f"quick gate: {gate.summary()}\n")
        options.workloads = "rep"
        return gate.workloads
    if options.workloads != "rep":
        return None
    from fibtui.core.plan import gate_representatives

    return gate_representatives(ws, options.definition)


class _Printer:
    """Live progress for a terminal: one line per finished job, ETA, the final table."""

    def __init__(self, stream: TextIO) -> None:
        from fibtui.verbs._common import console

        self.con = console(file=stream)
        self.lock = __import__("threading").Lock()

    def __call__(self, event: object) -> None:
        from fibtui.runners.events import JobFinished

        try:
            self._print(event)
        except (OSError, ValueError):
            pass  # the terminal went away (an SSH drop): the journal, not the screen, is the record
        if isinstance(event, JobFinished):
            _test_delay("FIBTUI_TEST_PAUSE_AFTER_JOB_S")  # in the slot thread, between two jobs

    def _print(self, event: object) -> None:
        from rich.markup import escape

        from fibtui.runners.events import (
            JobFinished,
            LogLine,
            RunFinished,
            RunStarted,
            WorkerRestarted,
        )

        with self.lock:
            if isinstance(event, RunStarted):
                h = event.header
                sols = ", ".join(f"{s.role} {s.name}" for s in h.solutions)
                self.con.print(
                    f"[bold]run {h.run_id}[/]  {h.definition}  backend {h.backend} "
                    f"({h.timing_kind}{', L2 ' + h.l2_policy if h.l2_policy != 'n/a' else ''})"
                )
                self.con.print(
                    f"  {len(h.jobs)} jobs: {len(set(j.uuid for j in h.jobs))} workloads × {h.repeats} repeat(s) × "
                    f"{escape('[' + sols + ']')}"
                )
                if h.timing_kind == "cpu-interpreter":
                    self.con.print(
                        "  [yellow]timings are CPU-interpreter wall times: they check the gate, they say nothing about GPU speed[/]"
                    )
                if event.resumed:
                    self.con.print(f"  resuming: {event.done_before} job(s) already in the journal")
            elif isinstance(event, JobFinished):
                r = event.result
                colour = {"PASSED": "green", "UNSUPPORTED_HERE": "yellow"}.get(r.status, "red")
                axes = " ".join(f"{k}={v}" for k, v in r.axes.items())
                lat = _fmt_latency(r.latency_ms)
                ref = (
                    f"ref {_fmt_latency(r.reference_latency_ms)}" if r.reference_latency_ms else ""
                )
                eta = f"ETA {_fmt_eta(event.eta_s)}" if event.eta_s is not None else ""
                err = f"  {r.error[:160]}" if r.error and r.status != "PASSED" else ""
                width = len(str(event.total))
                self.con.print(
                    f"[{event.done:>{width}}/{event.total}] [{colour}]{r.status:<8}[/] {r.role[:4]} {escape(r.solution)} "
                    f"{escape(axes)}  {lat}  {ref}  {event.passed}/{event.done} ok  {eta}{escape(err)}"
                )
            elif isinstance(event, WorkerRestarted):
                self.con.print(
                    f"  [yellow]worker {event.slot} restarted: {escape(event.reason)}[/]"
                )
            elif isinstance(event, LogLine):
                style = {"error": "red", "warning": "yellow"}.get(event.level, "dim")
                self.con.print(f"  [{style}]{escape(event.text)}[/]")
            elif isinstance(event, RunFinished):
                pass

    def summary(self, record: RunRecord) -> None:
        from rich.markup import escape

        s = record.summary
        colour = "green" if s.complete else "red"
        self.con.print(
            f"[bold {colour}]{record.state}[/]: {s.passed}/{s.total} PASSED "
            f"({s.done} done)  record: {record.run_id}/run.json"
        )
        adaptive = record.adaptive
        if adaptive:
            planned = s.planned if s.planned is not None else s.total
            self.con.print(
                f"  adaptive (cap {adaptive['plan'].get('cap')} repeats): "
                f"{escape(str(adaptive.get('stopped') or 'not finished'))}"
                f"{': ' + escape(str(adaptive['reason'])) if adaptive.get('reason') else ''}; "
                f"{s.done} of {planned} planned jobs ran"
            )
        for info in s.per_solution.values():
            mean = info.mean_latency_ms
            p95 = info.p95_latency_ms
            stats = (
                f"  mean {_fmt_latency(mean)}  p95 {_fmt_latency(p95)}" if mean is not None else ""
            )
            self.con.print(
                f"  {info.role:<9} {escape(info.name)}  {info.passed}/{info.jobs} PASSED{stats}"
            )
            official = [
                j.timing["official"]["latency_ms"]
                for j in record.jobs
                if j.solution == info.name
                and j.role == info.role
                and j.status == "PASSED"
                and isinstance((j.timing or {}).get("official"), dict)
                and isinstance(j.timing["official"].get("latency_ms"), (int, float))
            ]
            if official:
                self.con.print(
                    f"  {'':<9} official-equivalent (--timing official): mean "
                    f"{_fmt_latency(sum(official) / len(official))} over {len(official)} job(s)"
                )
        if record.timing_kind == "cpu-interpreter":
            self.con.print("  [yellow](CPU-interpreter timings)[/]")
        from fibtui.core.runs import host_phases, not_judged

        phases = host_phases(record.jobs)
        if phases is not None:
            # what the harness itself cost a job (the gate's checks among it): measured, shown
            self.con.print(f"  [dim]{escape(phases.describe())}[/]")

        for group in not_judged(record.jobs):
            self.con.print(f"  [yellow]UNSUPPORTED_HERE: {escape(group.describe())}[/]")
            if group.on_b200:
                self.con.print(
                    f"  [yellow]  Modal's B200 has it: fibtui run --send-unsupported "
                    f"{escape(record.run_id)} (shows the plan and cost first)[/]"
                )
            elif group.evidence:
                self.con.print(f"  [dim]  {escape(group.evidence[:200])}[/]")


def _fmt_latency(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms >= 1.0:
        return f"{ms:.2f} ms"
    return f"{ms * 1000:.2f} us"


def _fmt_eta(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def runs_list(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.core.runs import list_runs
    from fibtui.verbs._common import console, emit_json, print_table, workspace_from

    ws = workspace_from(args)
    assert ws is not None
    runs = list_runs(ws.archive_root)
    if args.json:
        emit_json({"runs": [r.to_json() for r in runs]})
        return 0
    t = Table(
        "run_id",
        "state",
        "jobs",
        "passed",
        "backend",
        "started",
        box=None,
        pad_edge=False,
        header_style="bold",
    )
    for r in runs:
        colour = {"complete": "green", "running": "cyan", "interrupted": "yellow"}.get(
            r.state, "red"
        )
        t.add_row(
            escape(r.run_id),
            f"[{colour}]{r.state}[/]",
            f"{r.jobs_done}/{r.jobs_total}",
            str(r.passed),
            escape(r.backend),
            escape(r.started or ""),
        )
    print_table(console(), t, ids=["run_id"], drop=["started", "backend"])
    return 0
