"""The harness's seal: what the timer and the judge rely on, checked unchanged after solution code
ran and before the harness uses any of it again.

A solution runs in the worker's own process, beside the timer (CUPTI records are read in-process,
so timing cannot move out of it). So the worker takes, before the first solution call of a job,
the identity of every function, class and module it relies on: the public and private callables
of the standard modules it uses (``builtins``, ``time``, ``statistics``, ``math``), of torch
(``torch``, ``torch.cuda``, ``torch.profiler`` and the profiler classes, ``torch.Tensor``'s own
methods), of Triton's JIT, and of every fibtui module loaded, with the code object of every
fibtui function and method. :meth:`Seal.broken` names what differs: an attribute replaced or
removed, a function's code swapped, a module replaced in ``sys.modules``, a trace or profile
function set (``sys.settrace``, ``sys.setprofile``), a ``sys.monitoring`` tool registered. The
worker calls it after each solution's first correctness call, before judging, and after the
last timed call, before the profile is read: a patch that would undo itself when the harness
calls it is seen before the harness calls it. Threads a solution leaves running are reported,
not failed (libraries start pools): a thread could patch between the check and the read.

What the seal cannot see: a solution that writes the process's memory directly (ctypes, a C
extension) or reaches the harness's objects through the garbage collector and changes their
contents. The official harness runs solutions in-process too; docs/measurement.md says this.
"""

from __future__ import annotations

import itertools
import operator
import sys
import threading
import types
from typing import Any

#: modules whose callables the timer and the judge use (when loaded)
SEALED_MODULES = (
    "builtins",
    "time",
    "statistics",
    "math",
    "torch",
    "torch.cuda",
    "torch.profiler",
    "torch.profiler.profiler",
    "torch.autograd",
    "torch.autograd.profiler",
    "triton",
    "triton.runtime.jit",
)

_MISSING = object()
#: names Python's own machinery adds to a class when it first needs them (copyreg's cache)
_LAZY_NAMES = frozenset({"__slotnames__"})


def _sealed_value(value: Any) -> bool:
    """Callables, classes and modules: what a patch replaces (plain data may change by itself:
    a flag set when CUDA initializes)."""
    return callable(value) or isinstance(value, (type, types.ModuleType, property))


def _classes() -> list[type]:
    out: list[type] = []
    try:
        import torch

        out.append(torch.Tensor)
        out.append(torch.profiler.profile)
        out.append(torch.autograd.profiler.profile)
    except Exception:  # noqa: BLE001 - no torch: nothing of it to seal
        pass
    try:
        from triton.runtime.jit import JITFunction

        out.append(JITFunction)
    except Exception:  # noqa: BLE001
        pass
    return out


class Seal:
    """The identities taken now; :meth:`broken` lists what changed since."""

    def __init__(self) -> None:
        #: per sealed namespace: its label, the mapping, its keys and the values they held
        self._spaces: list[tuple[str, Any, list[str], list[Any]]] = []
        #: classes' own namespaces and their sizes: a name added to one shadows what it inherits
        #: (``torch.Tensor.abs = ...`` replaces a method defined in C)
        self._class_keys: list[tuple[str, Any, frozenset[str]]] = []
        self._codes: list[tuple[str, Any, Any]] = []
        self._modules: list[tuple[str, types.ModuleType]] = []
        names = list(SEALED_MODULES) + sorted(m for m in sys.modules if m.split(".")[0] == "fibtui")
        for name in names:
            module = sys.modules.get(name)
            if not isinstance(module, types.ModuleType):
                continue
            self._modules.append((name, module))
            own = name.split(".")[0] == "fibtui"
            self._seal_space(name, vars(module))
            for key, value in list(vars(module).items()):
                if own and isinstance(value, types.FunctionType):
                    self._codes.append((f"{name}.{key}", value, value.__code__))
                if own and isinstance(value, type) and value.__module__ == name:
                    self._seal_class(f"{name}.{key}", value, with_code=True)
        for cls in _classes():
            self._seal_class(f"{cls.__module__}.{cls.__qualname__}", cls, with_code=False)
        self._trace = sys.gettrace()
        self._profile = sys.getprofile()
        self._tools = _monitoring_tools()
        self._threads = {t.ident for t in threading.enumerate()}

    def _seal_space(self, label: str, space: Any) -> None:
        keys = [
            k
            for k, v in list(space.items())
            if _sealed_value(v) or isinstance(v, (staticmethod, classmethod))
        ]
        self._spaces.append((label, space, keys, [space[k] for k in keys]))

    def _seal_class(self, label: str, cls: type, with_code: bool) -> None:
        space = vars(cls)  # a mappingproxy reads like a dict
        self._seal_space(label, space)
        self._class_keys.append((label, space, frozenset(space)))
        if not with_code:
            return
        for key, value in list(space.items()):
            fn = getattr(value, "__func__", value)
            if isinstance(fn, types.FunctionType):
                self._codes.append((f"{label}.{key}", fn, fn.__code__))

    def broken(self) -> list[str]:
        """What changed since the seal was taken (empty: nothing). The common case, nothing,
        costs a pass of C-level maps over the sealed names."""
        out = []
        for label, space, keys, values in self._spaces:
            now = list(map(space.get, keys, itertools.repeat(_MISSING)))
            if any(map(operator.is_not, now, values)):
                for key, value, got in zip(keys, values, now, strict=True):
                    if got is _MISSING:
                        out.append(f"{label}.{key} was removed")
                    elif got is not value:
                        out.append(f"{label}.{key} was replaced")
        for label, space, known in self._class_keys:
            if len(space) != len(known):
                added = sorted(set(space) - known - _LAZY_NAMES)
                out.extend(f"{label}.{key} was added" for key in added)
        codes = list(map(operator.attrgetter("__code__"), (fn for _, fn, _ in self._codes)))
        if any(map(operator.is_not, codes, (c for _, _, c in self._codes))):
            for label, fn, code in self._codes:
                if fn.__code__ is not code:
                    out.append(f"{label}'s code was replaced")
        for name, module in self._modules:
            if sys.modules.get(name) is not module:
                out.append(f"sys.modules[{name!r}] was replaced")
        if sys.gettrace() is not self._trace:
            out.append("a trace function was set (sys.settrace)")
        if sys.getprofile() is not self._profile:
            out.append("a profile function was set (sys.setprofile)")
        tools = _monitoring_tools()
        if tools != self._tools:
            out.append(
                f"a sys.monitoring tool was registered ({', '.join(sorted(tools - self._tools))})"
            )
        return out

    def new_threads(self) -> list[str]:
        """Threads started since the seal was taken and still running (names)."""
        return [
            t.name for t in threading.enumerate() if t.ident not in self._threads and t.is_alive()
        ]

    def __len__(self) -> int:
        return sum(len(keys) for _, _, keys, _ in self._spaces) + len(self._codes)


def _monitoring_tools() -> set[str]:
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return set()
    out = set()
    for tool in range(6):
        try:
            name = monitoring.get_tool(tool)
        except ValueError:
            continue
        if name:
            out.add(f"{tool}:{name}")
    return out
