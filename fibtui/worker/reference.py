"""Reference outputs from the definition's ``reference``, cached on disk with their timing.

Keyed by a hash of (definition, workload, seed, device), so a sweep never reruns a slow reference:
the second sweep reads outputs from the cache instead of recomputing them. The worker also keeps
the outputs it used last in memory, on the device (``FIBTUI_REFERENCE_MEMORY_MB``; by default a
sixteenth of the GPU's memory, between 1 and 16 GiB, and 1 GiB on the CPU), so the repeats of a
workload and its correctness trials do not read the same file again: on the H200 reading them
back from disk took a fifth of every paired job of a warm sweep.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch


def definition_fingerprint(definition: dict[str, Any]) -> str:
    keep = {k: definition.get(k) for k in ("name", "axes", "inputs", "outputs", "reference")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()


#: how inputs are made from (workload, seed); raised whenever that changes (2: structured inputs
#: and evaluator-prepared inputs), so a cached reference never belongs to other inputs
INPUTS_VERSION = 2


def cache_key(def_fp: str, workload: dict[str, Any], seed: int, device_name: str) -> str:
    wl = {
        "uuid": workload.get("uuid"),
        "axes": workload.get("axes"),
        "inputs": workload.get("inputs"),
    }
    blob = json.dumps(
        {"d": def_fp, "w": wl, "s": seed, "dev": device_name, "v": INPUTS_VERSION}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class ReferenceRunner:
    def __init__(
        self, definition: dict[str, Any], device: str, device_name: str, cache_dir: str | None
    ) -> None:
        self.definition = definition
        self.device = torch.device(device)
        self.device_name = device_name
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.fp = definition_fingerprint(definition)
        namespace: dict[str, Any] = {"__name__": "fibtui_reference"}
        exec(
            compile(definition["reference"], f"<reference of {definition['name']}>", "exec"),
            namespace,
        )  # noqa: S102 - the definition's reference is the contract
        self.run = namespace["run"]
        self.hits = 0
        self.misses = 0
        self.memory_hits = 0
        self._memory: OrderedDict[str, tuple[list[torch.Tensor], float | None, int]] = OrderedDict()
        self._memory_bytes = 0
        self._memory_budget = _memory_budget_bytes(self.device)

    def _remember(self, key: str, outs: list[torch.Tensor], latency: float | None) -> None:
        size = sum(o.numel() * o.element_size() for o in outs if isinstance(o, torch.Tensor))
        if size > self._memory_budget:
            return
        old = self._memory.pop(key, None)
        if old is not None:
            self._memory_bytes -= old[2]
        self._memory[key] = (list(outs), latency, size)
        self._memory_bytes += size
        while self._memory_bytes > self._memory_budget and self._memory:
            _, (_, _, dropped) = self._memory.popitem(last=False)
            self._memory_bytes -= dropped

    def fits(
        self, definition: dict[str, Any], device: str, device_name: str, cache_dir: str | None
    ) -> bool:
        """Would a new runner for these be this one? (A worker that serves another run keeps its
        runner, and the outputs it holds in memory, when the definition and device are the same.)"""
        return (
            self.fp == definition_fingerprint(definition)
            and self.device == torch.device(device)
            and self.device_name == device_name
            and self.cache_dir == (Path(cache_dir) if cache_dir else None)
        )

    def new_run(self) -> None:
        """Count hits and misses afresh for the next run (the outputs in memory stay)."""
        self.hits = self.misses = self.memory_hits = 0

    def memory_bytes(self) -> int:
        return self._memory_bytes

    def _recalled(self, key: str) -> tuple[list[torch.Tensor], float | None] | None:
        got = self._memory.get(key)
        if got is None:
            return None
        self._memory.move_to_end(key)
        self.memory_hits += 1
        return list(got[0]), got[1]

    def _path(self, key: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / key[:2] / f"{key}.pt"

    def outputs(
        self,
        workload: dict[str, Any],
        seed: int,
        inputs: list[Any],
        out_names: list[str],
        out_dtypes: list[torch.dtype],
        time_it: bool,
    ) -> tuple[list[torch.Tensor], float | None]:
        """Reference outputs (on the device) and its latency in ms (None when not timed)."""
        from fibtui.worker.check import normalize

        key = cache_key(self.fp, workload, seed, self.device_name)
        recalled = self._recalled(key)
        if recalled is not None:
            return recalled
        path = self._path(key)
        if path is not None and path.is_file():
            try:
                blob = torch.load(path, map_location=self.device, weights_only=True)
                self.hits += 1
                outs, latency = list(blob["outputs"]), blob.get("latency_ms")
                self._remember(key, outs, latency)
                return outs, latency
            except Exception:  # noqa: BLE001 - a broken cache entry is recomputed
                pass
        self.misses += 1
        with torch.no_grad():
            result = self.run(*inputs)
        outs = normalize(result, out_names, out_dtypes, self.device)
        latency = self.time(inputs) if time_it else None
        self._remember(key, outs, latency)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            os.close(fd)
            try:
                torch.save(
                    {"outputs": [o.detach().cpu() for o in outs], "latency_ms": latency}, tmp
                )
                os.replace(tmp, path)
            except OSError:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        return outs, latency

    def time(self, inputs: list[Any], calls: int = 3) -> float:
        """Median wall time of a few reference calls, synchronized (context only: never a decision)."""
        samples = []
        for _ in range(calls):
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            t0 = time.perf_counter()
            with torch.no_grad():
                self.run(*inputs)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            samples.append((time.perf_counter() - t0) * 1000.0)
        samples.sort()
        return samples[len(samples) // 2]


def _memory_budget_bytes(device: torch.device) -> int:
    """``FIBTUI_REFERENCE_MEMORY_MB`` (0 keeps nothing in memory). Unset, empty, ``auto`` or not a
    number: a sixteenth of the GPU's total memory, between 1 and 16 GiB (8.7 GiB on an H200, where
    the 54-workload gdn sweep's outputs for its two trial seeds are 1.3 GB and a 1 GiB budget
    evicted, least recently used first, exactly the outputs the next repeat needed); 1 GiB on the
    CPU."""
    raw = os.environ.get("FIBTUI_REFERENCE_MEMORY_MB", "").strip()
    try:
        return max(0, int(float(raw) * 2**20))
    except (ValueError, OverflowError):
        pass
    gib = 2**30
    if device.type != "cuda":
        return gib
    try:
        total = int(torch.cuda.get_device_properties(device).total_memory)
    except Exception:  # noqa: BLE001 - no properties: the floor
        return gib
    return min(16 * gib, max(gib, total // 16))
