"""The backends a run can use, by name: what each needs, how it builds its runner, what it can do.

A backend declares itself: its module (listed in :data:`BACKEND_MODULES`) calls :func:`register`
with one :class:`Backend` when it is imported: its name, its summary, its options (the flags it
adds to ``fibtui run``, and the fields the TUI can show for them), its timing kind and its runner
factory. A backend module imports its runner when the factory is called, so listing the backends
(``--help``, the palette) imports no runner. To add one: write its module (its runner is anything
with ``run(on_event, cancel) -> record``, :class:`fibtui.runners.events.Runner`) and add its name
to :data:`BACKEND_MODULES`; ``fibtui run --backend NAME``, resume, retry, ``--plan``, the cost
guard and the TUI read everything else from its :class:`Backend`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fibtui.core import backends
from fibtui.core.errors import UsageError

if TYPE_CHECKING:
    from fibtui.runners.events import Runner

#: The modules that declare the backends, in the order ``--help`` lists them. Each registers its
#: backends (:func:`register`) when imported; a new backend is its module and one line here.
BACKEND_MODULES: tuple[str, ...] = (
    "fibtui.runners.backends.local",
    "fibtui.runners.backends.modal",
)


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
class Option:
    """A flag a backend adds to ``fibtui run``, and the TUI field that can stand for it.

    Its value lands on the parsed arguments under :attr:`dest`; with ``run_option`` it is also
    copied into the run's options (``RunOptions``): onto the attribute of that name where there is
    one, else into ``RunOptions.backend_options[dest]``. Two backends may share one option (the
    same object, or an equal one): it is added once."""

    flag: str
    #: ``--help``'s text
    help: str
    #: ``store_true`` (a switch) or ``store`` (a value)
    action: str = "store_true"
    #: a ``store`` option's type (``int``, ``float``, ``str``)
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    default: Any = None
    #: left out of ``--help`` (a test-only switch)
    hidden: bool = False
    #: the TUI field's label; None: the TUI shows no field for it
    label: str | None = None
    #: the value goes into the run's options (else only the CLI reads it)
    run_option: bool = True

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def field_kind(self) -> str:
        """What kind of TUI field stands for it: ``switch`` or ``value``."""
        return "switch" if self.action == "store_true" else "value"

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        kwargs: dict[str, Any] = {
            "action": self.action,
            "help": argparse.SUPPRESS if self.hidden else self.help,
        }
        if self.action != "store_true":
            kwargs.update(type=self.type, metavar=self.metavar, default=self.default)
        parser.add_argument(self.flag, **kwargs)


def _never(_: Any) -> bool:
    return False


@dataclass(frozen=True)
class Backend:
    name: str
    #: one line for ``--help`` and the palette
    summary: str
    #: (found, in_process) -> None, or a UsageError naming what this machine lacks
    check: Callable[[backends.Backends, bool], None]
    #: the run's settings -> the runner
    runner: Callable[[RunContext], Runner]
    #: (found, options) -> the backend the worker engine runs as on this machine (a registered
    #: name: its ``timing_kind``, ``runs_here`` and ``l2_policy`` are the run's)
    engine: Callable[[backends.Backends, Any], str]
    #: (ws, options, engine config) -> extra header settings under the backend's name, or None
    header_settings: Callable[[Any, Any, dict[str, Any]], dict[str, Any]] | None = None
    #: (ws, options) -> a plan printed by ``fibtui run --plan`` (no network), or None: no plan
    plan: Callable[[Any, Any], Any] | None = None
    #: what ``--plan`` prints for this backend, for ``--plan``'s help
    plan_help: str = ""
    #: a run costs money: ``fibtui run`` checks the plan's worst case before launching
    billed: bool = False
    #: (ws, run_id, retry) -> (cost, settings) of resuming run_id or retrying its failed jobs when
    #: the run is this backend's and is billed (``cost.needs_confirmation``,
    #: ``cost.lines(settings)``), else None
    rerun_cost: Callable[[Any, str, bool], Any] | None = None
    #: the flags this backend adds to ``fibtui run`` (and the TUI fields that stand for them)
    options: tuple[Option, ...] = ()
    #: how its engine times latencies (``cupti``, ``cpu-interpreter``)
    timing_kind: str = "cupti"
    #: as an engine: the solutions build and run on this machine (its toolchain is checked before
    #: a run, a CUTLASS checkout under the workspace's reference/ is used)
    runs_here: bool = False
    #: as an engine: the L2 policy between launches applies (else the header says ``n/a``)
    l2_policy: bool = True
    #: ``--adaptive`` runs on it
    adaptive: bool = False
    #: (options) -> the run goes in this process (nothing billed; ``check``'s in_process)
    in_process: Callable[[Any], bool] = _never
    #: (a run header's settings) -> that run went in this process (a resumed run's ``check``)
    resumed_in_process: Callable[[dict[str, Any]], bool] = _never


_BACKENDS: dict[str, Backend] = {}
_loaded = False


def register(backend: Backend) -> Backend:
    """Make ``backend`` one ``fibtui run --backend`` can name (a backend module calls this)."""
    known = _BACKENDS.get(backend.name)
    if known is not None and known != backend:
        raise ValueError(f"backend {backend.name!r} is registered twice")
    _BACKENDS[backend.name] = backend
    return backend


def unregister(name: str) -> None:
    """Forget a backend registered at run time (tests)."""
    _BACKENDS.pop(name, None)


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in BACKEND_MODULES:
            importlib.import_module(module)
        _loaded = True


def all_backends() -> dict[str, Backend]:
    """Every registered backend by name, in registration order."""
    _load()
    return _BACKENDS


def default_backend(found: backends.Backends | None = None) -> str:
    """The backend a run takes when none is named (``fibtui run``; the TUI's g, s and watch mode):
    the GPU when this machine shows one, else the CPU interpreter. ``found``: what
    ``backends.detect()`` found; without it, detected here (nvidia-smi: up to 5 s, so the TUI
    calls this from a worker)."""
    found = found if found is not None else backends.detect()
    return "local" if found.gpu else "interpreter"


def names() -> tuple[str, ...]:
    return tuple(all_backends())


def get(name: str) -> Backend:
    known = all_backends()
    try:
        return known[name]
    except KeyError:
        raise UsageError(
            f"unknown backend {name!r} (choose from {', '.join(known)}; parity has its own verb)"
        ) from None


def help_text() -> str:
    """``--backend``'s help: each backend and its summary, and ``auto``."""
    return " | ".join(f"{b.name} ({b.summary})" for b in all_backends().values()) + (
        " | auto (this machine's backend, then Modal's B200 for what its GPU cannot run: "
        "fibtui.runners.split)"
    )


def with_plan() -> list[str]:
    return [b.name for b in all_backends().values() if b.plan is not None]


def plan_help() -> str:
    """``--plan``'s help: what it prints for each backend that has a plan."""
    return "; ".join(
        f"with --backend {b.name}: {b.plan_help}"
        for b in all_backends().values()
        if b.plan is not None
    )


def options() -> list[Option]:
    """Every backend's options, each once (by flag), in the backends' order."""
    out: dict[str, Option] = {}
    for b in all_backends().values():
        for opt in b.options:
            known = out.get(opt.flag)
            if known is not None and known != opt:
                raise ValueError(f"two backends declare {opt.flag} differently")
            out[opt.flag] = opt
    return list(out.values())


def tui_fields(name: str) -> list[Option]:
    """The fields the TUI can show for a run on backend ``name`` (its options with a label)."""
    return [opt for opt in get(name).options if opt.label is not None]


def timing_kind(engine: str) -> str:
    """How an engine backend's latencies are timed (a name no backend registered: core's rule)."""
    spec = all_backends().get(engine)
    return spec.timing_kind if spec is not None else backends.timing_kind_of(engine)


def needs_torch_triton(name: str, found: backends.Backends) -> None:
    """The check of a backend whose engine runs in a Python on this machine."""
    if not (found.torch and found.triton):
        raise UsageError(
            f"the {name} backend needs torch and triton in this Python ({sys.executable}): "
            "pip install 'fibtui[gpu]'"
        )
