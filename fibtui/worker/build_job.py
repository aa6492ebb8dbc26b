"""What fibtui.worker.build and fibtui.worker.native share: the errors of a build, a planned
:class:`BuildJob`, the :class:`BuiltSolution` it yields, and the writing of a solution's sources
into a folder. Standard library only."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from fibtui.core.gpuarch import MachineLimit


class BuildError(Exception):
    """The solution's sources do not build or import: COMPILE_ERROR with this message."""

    status = "COMPILE_ERROR"

    def __init__(
        self,
        message: str,
        log: str = "",
        where: str | None = None,
        limit: MachineLimit | None = None,
    ) -> None:
        super().__init__(message)
        self.log = log
        #: ``file:line`` inside the solution's sources, when known
        self.where = where
        #: what this machine lacks (a ToolLimit's GPU architecture, headers), when known
        self.limit = limit


class ToolLimit(BuildError):
    """This machine cannot build or run the solution (no GPU, no nvcc, a package not installed):
    UNSUPPORTED_HERE, not the kernel's fault."""

    status = "UNSUPPORTED_HERE"


def full_text(exc: BaseException) -> str:
    """An exception's whole message with its causes (a DSL wraps the arch check's error)."""
    parts: list[str] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen and len(parts) < 8:
        seen.add(id(e))
        parts.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    return "\n".join(parts)


def current_arch(device_type: str = "cuda") -> str | None:
    """This process's GPU architecture (``sm_90``), or None on the CPU or when torch cannot say.
    ``FIBTUI_TEST_DEVICE_ARCH`` makes a CPU worker report one (the tests drive arch limits end
    to end on Triton's interpreter with it)."""
    if device_type != "cuda":
        return os.environ.get("FIBTUI_TEST_DEVICE_ARCH") or None
    try:
        import torch

        major, minor = torch.cuda.get_device_capability()
    except Exception:  # noqa: BLE001 - no GPU to ask: no architecture known
        return None
    return f"sm_{major}{minor}"


def arch_limit(text: str, device_type: str = "cuda") -> MachineLimit | None:
    """The GPU-architecture limit a failure's text shows on this process's GPU, or None."""
    from fibtui.core.gpuarch import Arch, limit_from_text

    arch = current_arch(device_type)
    if arch is None:
        return None
    return limit_from_text(text, Arch.parse(arch))


@dataclass
class BuiltSolution:
    sid: str  # the id the runner gave it ("baseline-0", "candidate-1"...)
    name: str
    fn: Callable[..., Any]
    dps: bool
    language: str
    folder: Path  # where its sources were written (tracebacks inside it are the solution's)
    source_hash: str
    #: how it was built: builder, cached, build_s, the compiler log's path
    meta: dict[str, Any] = field(default_factory=dict)


def _safe_rel(rel: str) -> Path:
    p = PurePosixPath(rel.replace("\\", "/"))
    if (
        p.is_absolute()
        or rel.startswith(("/", "\\"))
        or ".." in p.parts
        or not p.parts
        or (len(rel) > 1 and rel[1] == ":")
    ):
        raise BuildError(f"source path {rel!r} is absolute or leaves the solution folder")
    if any(ord(c) < 32 for c in rel):
        raise BuildError(f"source path {rel!r} holds control characters")
    return Path(*p.parts)


def write_sources(sources: list[dict[str, str]], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for s in sources:
        target = folder / _safe_rel(s["path"])
        if folder.resolve() not in target.resolve().parents:
            raise BuildError(f"source path {s['path']!r} leaves the solution folder")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(s["content"], encoding="utf-8")
        except (OSError, ValueError) as exc:
            raise BuildError(f"cannot write source {s['path']!r}: {exc}") from None


@dataclass
class BuildJob:
    """One solution's build, planned: ``compiles`` says whether running it compiles anything
    (a compiled solution not yet in the build cache)."""

    sid: str
    solution: dict[str, Any]
    builder: str
    compiles: bool
    _run: Callable[[], BuiltSolution]
    #: (inputs, outputs) of the definition, to check the entry point's signature against
    arity: tuple[int, int] | None = None

    def run(self) -> BuiltSolution:
        built = self._run()
        if self.arity is not None:
            check_signature(built.fn, self.arity[0], self.arity[1], built.dps)
        return built


def check_signature(fn: Callable[..., Any], n_inputs: int, n_outputs: int, dps: bool) -> None:
    """The checks flashinfer-bench's builders make on the entry point (a BuildError there is a
    COMPILE_ERROR here too): it must take the positional arguments the harness passes (inputs,
    then outputs in destination-passing style; extra parameters with defaults are fine), and a
    value-returning one's return annotation, when it has one, must fit the number of outputs.
    Skipped when Python cannot tell the signature (compiled functions)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    expected = n_inputs + n_outputs if dps else n_inputs
    style = "destination-passing" if dps else "value-returning"
    try:
        signature.bind(*[object()] * expected)
    except TypeError as exc:
        raise BuildError(
            f"the {style} entry point must take {expected} positional arguments; "
            f"its signature {signature} does not: {exc}"
        ) from None
    if dps or signature.return_annotation is inspect.Signature.empty:
        return
    ret = signature.return_annotation
    if getattr(ret, "__origin__", None) is tuple:
        args = getattr(ret, "__args__", None)
        if args is not None and len(args) != n_outputs:
            raise BuildError(
                f"a value-returning entry point with {n_outputs} outputs must return a "
                f"{n_outputs}-element tuple; it is annotated {ret}"
            )
    elif ret is None:
        if n_outputs != 0:
            raise BuildError(
                f"a value-returning entry point with {n_outputs} outputs must not return None"
            )
    elif n_outputs != 1:
        # as flashinfer-bench: an annotation that is not a tuple (a string, under
        # `from __future__ import annotations`, is not one) means one output
        raise BuildError(
            f"a value-returning entry point annotated {ret!r} returns one output; the definition has {n_outputs}"
        )
