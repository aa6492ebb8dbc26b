"""What timed calls get as inputs: the same buffers every call, refilled in place with other
values before each call, so an answer saved from an earlier call (by buffer address, or by
tensor) is wrong on the next one, and the outputs of sampled timed calls can be checked against
the reference of the values that call had.

One job's rotation holds, for the tensors a workload makes (random and structured inputs):

- ``pool``: K input sets (seeds of their own), each packed into one arena, whose reference
  outputs the worker knows (they are checked);
- ``probes``: J more sets, fresh values no call has seen before, used once per solution to time
  a call on inputs it cannot have kept anything for (:mod:`fibtui.worker.timing` compares that
  call with the timed ones);
- ``live``: the arena every timed call reads; ``refill(k)`` copies pool set ``k`` into it (on the
  GPU with one named kernel of fibtui's own, ``_fibtui_refill``, so the profile can tell the
  harness's work from the solution's), ``probe(j)`` copies probe set ``j``.

Inputs read from safetensors files are the workload's own constants: every set shares them and
they are not copied. Scalars are passed by value with the set's own values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

REFILL_NAME = "_fibtui_refill"
KEEP_NAME = "_fibtui_keep"
#: the arena's tensors start on this boundary (bytes)
ALIGN = 256
#: the largest live arena a sampled call's inputs are copied after it, to see that it did not
#: write them (bytes)
SNAPSHOT_LIMIT = 256 * 2**20


@dataclass
class Arena:
    """One input set packed into one byte buffer: ``views`` are the tensors (the set's order),
    ``None`` where the input is not packed (a scalar, a shared constant)."""

    buffer: torch.Tensor
    views: list[torch.Tensor | None]


def _layout(template: list[Any], packed: list[bool]) -> tuple[list[int], int]:
    offsets, total = [], 0
    for value, pack in zip(template, packed, strict=True):
        if pack:
            total = (total + ALIGN - 1) // ALIGN * ALIGN
            offsets.append(total)
            total += value.numel() * value.element_size()
        else:
            offsets.append(-1)
    return offsets, max(total, 16)


def pack(
    values: list[Any], packed: list[bool], offsets: list[int], total: int, device: torch.device
) -> Arena:
    buffer = torch.zeros(total, dtype=torch.uint8, device=device)
    views: list[torch.Tensor | None] = []
    for value, pack_it, offset in zip(values, packed, offsets, strict=True):
        if not pack_it:
            views.append(None)
            continue
        nbytes = value.numel() * value.element_size()
        view = buffer[offset : offset + nbytes].view(value.dtype).view(value.shape)
        if nbytes:
            view.copy_(value)
        views.append(view)
    return Arena(buffer, views)


@dataclass
class Rotation:
    """The live buffers timed calls get, and how the harness refills them (see the module)."""

    pool_sets: list[list[Any]]  # the pool's input sets as calls get them (views into arenas)
    probe_sets: list[list[Any]]
    live_set: list[Any]  # the live arena's views (and the shared inputs, and placeholders)
    packed: list[bool]
    device: torch.device
    _pool: list[Arena] = field(default_factory=list)
    _probes: list[Arena] = field(default_factory=list)
    _live: Arena | None = None
    _copies: dict[int, Callable[[], None]] = field(default_factory=dict)
    _snapshot: Keeper | None = None
    _mask_key: tuple[Any, ...] | None = None
    _args: dict[int, list[Any]] = field(default_factory=dict)
    _mask: torch.Tensor | None = None

    @classmethod
    def build(
        cls,
        pool: list[list[Any]],
        probes: list[list[Any]],
        shared: list[bool],
        device: torch.device,
    ) -> Rotation:
        """``pool`` and ``probes``: input sets as the maker made them; ``shared``: per input,
        whether every set holds the same tensor (a safetensors constant)."""
        template = pool[0]
        packed = [
            isinstance(v, torch.Tensor) and v.is_contiguous() and not s
            for v, s in zip(template, shared, strict=True)
        ]
        offsets, total = _layout(template, packed)
        arenas = [pack(s, packed, offsets, total, device) for s in pool]
        probe_arenas = [pack(s, packed, offsets, total, device) for s in probes]
        live = pack(template, packed, offsets, total, device)

        def as_set(arena: Arena, values: list[Any]) -> list[Any]:
            return [
                v if view is None else view for v, view in zip(values, arena.views, strict=True)
            ]

        rot = cls(
            [as_set(a, s) for a, s in zip(arenas, pool, strict=True)],
            [as_set(a, s) for a, s in zip(probe_arenas, probes, strict=True)],
            as_set(live, template),
            packed,
            device,
            arenas,
            probe_arenas,
            live,
        )
        return rot

    @property
    def rotates(self) -> bool:
        """Does a refill change anything a call reads (some input is packed)?"""
        return any(self.packed)

    @property
    def live_bytes(self) -> int:
        assert self._live is not None
        return int(self._live.buffer.numel())

    def args(self, k: int, probe: bool = False) -> list[Any]:
        """The arguments of a timed call after ``refill(k)`` (or ``probe(k)``): the live
        tensors, with that set's scalars and shared inputs (made once per set: a job asks for
        them before each of its 240 timed calls)."""
        key = -1 - k if probe else k
        got = self._args.get(key)
        if got is None:
            source = (self.probe_sets if probe else self.pool_sets)[k]
            got = self._args[key] = [
                live if pack_it else value
                for live, value, pack_it in zip(self.live_set, source, self.packed, strict=True)
            ]
        return list(got)

    def copier(self, source: Arena) -> Callable[[], None]:
        """A launcher that copies ``source`` into the live arena: on the GPU one Triton kernel of
        ours (named, so the profile tells it from the solution's work), launched without the JIT's
        per-launch binding when this Triton allows; on the CPU a plain copy."""
        assert self._live is not None
        dst, src = self._live.buffer, source.buffer
        if self.device.type != "cuda":
            return lambda: dst.copy_(src)
        return _gpu_copier(src, dst, self.device)

    def refill(self, k: int) -> None:
        self._copy(k, self._pool[k])

    def probe(self, j: int) -> None:
        self._copy(-1 - j, self._probes[j])

    def _copy(self, key: int, source: Arena) -> None:
        fn = self._copies.get(key)
        if fn is None:
            fn = self._copies[key] = self.copier(source)
        fn()

    def live_snapshot(self) -> torch.Tensor | None:
        """A copy of the live arena's bytes (what a call may not have changed), or None (no
        arena, or one past :data:`SNAPSHOT_LIMIT`: then only the correctness calls are checked
        for changed inputs)."""
        if self._live is None or not self.rotates or self.live_bytes > SNAPSHOT_LIMIT:
            return None
        if self._snapshot is None:
            self._snapshot = Keeper([self._live.buffer])
        return self._snapshot()[0]

    def pool_bytes(self, k: int) -> torch.Tensor:
        return self._pool[k].buffer

    def input_flag(
        self, snapshot: torch.Tensor, k: int, names: list[str], outputs: set[str]
    ) -> torch.Tensor | None:
        """One device-side flag (shape ``[1]``) for all of :meth:`input_changes` at once: do
        the bytes of any packed input the definition does not name as an output differ in
        ``snapshot`` from pool set ``k``'s? Three kernels over the arena whatever the number of
        inputs; :meth:`input_changes` names them once a flag is up. None: no input is checked."""
        mask = self._checked_mask(names, outputs)
        if mask is None:
            return None
        return ((snapshot != self._pool[k].buffer) & mask).any().reshape(1)

    def _checked_mask(self, names: list[str], outputs: set[str]) -> torch.Tensor | None:
        key = (tuple(names), tuple(sorted(outputs)))
        if self._mask_key == key:
            return self._mask
        assert self._live is not None
        mask = torch.zeros(self.live_bytes, dtype=torch.bool, device=self._live.buffer.device)
        base = self._live.buffer.data_ptr()
        any_checked = False
        for name, view in zip(names, self._live.views, strict=False):
            if view is None or name in outputs:
                continue
            nbytes = view.numel() * view.element_size()
            if nbytes:
                start = view.data_ptr() - base
                mask[start : start + nbytes] = True
                any_checked = True
        self._mask_key, self._mask = key, (mask if any_checked else None)
        return self._mask

    def input_changes(
        self, snapshot: torch.Tensor, k: int, names: list[str], outputs: set[str]
    ) -> list[tuple[str, torch.Tensor]]:
        """Per packed input (by name) a device-side flag: do its bytes in ``snapshot`` (the live
        arena after a call on pool set ``k``) differ from the set's own? Inputs the definition
        also names as outputs are the solution's to write and are left out."""
        assert self._live is not None
        ref = self._pool[k]
        out = []
        for name, view, pool_view in zip(names, self._live.views, ref.views, strict=True):
            if view is None or pool_view is None or name in outputs:
                continue
            start = view.data_ptr() - self._live.buffer.data_ptr()
            nbytes = view.numel() * view.element_size()
            if nbytes:
                a = snapshot[start : start + nbytes]
                b = ref.buffer[start : start + nbytes]
                out.append((name, (a != b).any()))
        return out


_copy_kernel: dict[str, Any] = {}


def keep_copy(tensors: list[Any]) -> list[Any]:
    """Copies of a call's outputs (anything not a tensor as it is), made right after the call:
    on the GPU by fibtui's own kernel ``_fibtui_keep``, so the copy is no part of the call's
    profiled time; a tensor that is not contiguous is made so first (by torch)."""
    return Keeper(tensors)()


class Keeper:
    """Copies of the same tensors, again and again (a destination-passing solution's out
    buffers, the live inputs): the copy kernel is compiled for them once and launched straight
    after (no per-launch binding of Triton's JIT); each call gives new copies."""

    def __init__(self, tensors: list[Any]) -> None:
        self.tensors = list(tensors)
        self._launch: dict[int, Callable[[torch.Tensor, torch.Tensor], None]] = {}

    def __call__(self) -> list[Any]:
        out: list[Any] = []
        for i, t in enumerate(self.tensors):
            if not isinstance(t, torch.Tensor):
                out.append(t)
                continue
            src = t.detach()
            if src.device.type != "cuda":
                out.append(src.clone())
                continue
            src = src.contiguous()
            dst = torch.empty_like(src)
            if src.numel():
                flat_src = src.view(-1).view(torch.uint8)
                flat_dst = dst.view(-1).view(torch.uint8)
                launch = self._launch.get(i)
                if launch is None or flat_src.data_ptr() != self.tensors[i].data_ptr():
                    launch = self._launch[i] = _keep_launcher(flat_src, flat_dst)
                else:
                    launch(flat_src, flat_dst)
            out.append(dst)
        return out


def _copy_kernels() -> tuple[Any, Any]:
    """fibtui's two named copy kernels, compiled by Triton when first launched: ``_fibtui_refill``
    (the live inputs before a call) and ``_fibtui_keep`` (a kept call's outputs after it). Two
    kernels of one body: the profile tells them apart by name."""
    if "refill" not in _copy_kernel:
        from fibtui.worker.gpu_kernels import _fibtui_keep, _fibtui_refill

        _copy_kernel["refill"], _copy_kernel["keep"] = _fibtui_refill, _fibtui_keep
    return _copy_kernel["refill"], _copy_kernel["keep"]


_BLOCK = 4096


#: compiled copy kernels, by kernel, dtypes, the pointers' 16-byte alignment (what Triton
#: specializes a pointer on), n's width and the device: each compiled once per process (n is not
#: specialized: fibtui.worker.gpu_kernels), then launched for any arena of any job
_compiled: dict[tuple[Any, ...], Any] = {}


def _launcher(kernel: Any, src: torch.Tensor, dst: torch.Tensor) -> Callable[[Any, Any], None]:
    """Copy ``src`` into ``dst`` now and return a launcher that copies a pair of tensors of the
    same size again without the JIT's binding, checked by one launch; the JIT's own launch where
    this Triton has no such launcher. The kernel goes through Triton's JIT (which compiles it)
    only the first time its key (:data:`_compiled`) is met in this process."""
    import triton

    from fibtui.worker.timing import grid3

    n = int(src.numel())
    grid = (triton.cdiv(n, _BLOCK),)
    stream = torch.cuda.current_stream(src.device).cuda_stream
    key = (
        id(kernel),
        src.dtype,
        dst.dtype,
        src.data_ptr() % 16 == 0,
        dst.data_ptr() % 16 == 0,
        n < 2**31,
        str(src.device),
    )
    compiled = _compiled.get(key)
    if compiled is None:
        compiled = kernel[grid](src, dst, n, BLOCK=_BLOCK)  # compiles; copies
    try:
        runner = compiled[grid3(grid)]
        runner(src, dst, n, _BLOCK, stream=stream)  # a launcher that fails is not used
    except Exception:  # noqa: BLE001 - another Triton: the JIT launches it
        return lambda s, d: kernel[grid](s, d, n, BLOCK=_BLOCK)
    _compiled[key] = compiled
    return lambda s, d: runner(s, d, n, _BLOCK, stream=stream)


def _keep_launcher(
    src: torch.Tensor, dst: torch.Tensor
) -> Callable[[torch.Tensor, torch.Tensor], None]:
    """A keep copy of ``src`` into ``dst`` now, and its launcher for the next ones."""
    return _launcher(_copy_kernels()[1], src, dst)


def _gpu_copier(src: torch.Tensor, dst: torch.Tensor, device: torch.device) -> Callable[[], None]:
    """The refill of the live arena ``dst`` from the arena ``src`` (int32 words when the arena's
    length allows: the layout pads it to 16 bytes)."""
    n_bytes = int(src.numel())
    if n_bytes % 4 == 0:
        s, d = src.view(torch.int32), dst.view(torch.int32)
    else:
        s, d = src, dst
    launch = _launcher(_copy_kernels()[0], s, d)
    return lambda: launch(s, d)
