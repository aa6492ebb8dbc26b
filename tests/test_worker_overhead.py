"""What a paired job pays besides the GPU (issue 20): the worker keeps the reference outputs it used
last in memory, reads the SM clock without asking NVML for anything else, and the runner's ETA
does not redo its leave-one-out choice after every job."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the worker's reference cache needs torch (gpu extra)")

from fibtui.core.eta import EtaModel  # noqa: E402
from fibtui.worker import env as envmod  # noqa: E402
from fibtui.worker.reference import ReferenceRunner  # noqa: E402

DEFINITION = {
    "name": "scale_by_two",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\ndef run(x):\n    return x * 2\n",
}


def _runner(tmp_path: Path) -> ReferenceRunner:
    return ReferenceRunner(DEFINITION, "cpu", "cpu", str(tmp_path / "cache"))


def _outputs(ref: ReferenceRunner, uuid: str, seed: int, n: int = 8):
    workload = {"uuid": uuid, "axes": {"n": n}, "inputs": {"x": {"type": "random"}}}
    x = torch.arange(n, dtype=torch.float32) + seed
    return ref.outputs(workload, seed, [x], ["y"], [torch.float32], time_it=False)


def test_a_repeat_reads_the_reference_from_memory_not_from_disk(tmp_path: Path) -> None:
    ref = _runner(tmp_path)
    first, _ = _outputs(ref, "a", 1)
    assert (ref.misses, ref.hits, ref.memory_hits) == (1, 0, 0)
    # the file is gone: only memory can answer, and it answers with the same values
    for f in (tmp_path / "cache").rglob("*.pt"):
        f.unlink()
    again, _ = _outputs(ref, "a", 1)
    assert (ref.misses, ref.hits, ref.memory_hits) == (1, 0, 1)
    assert torch.equal(first[0], again[0])
    assert torch.equal(again[0], (torch.arange(8, dtype=torch.float32) + 1) * 2)


def test_another_seed_is_another_reference(tmp_path: Path) -> None:
    ref = _runner(tmp_path)
    a, _ = _outputs(ref, "a", 1)
    b, _ = _outputs(ref, "a", 2)
    assert ref.misses == 2 and ref.memory_hits == 0
    assert not torch.equal(a[0], b[0])


def test_a_new_worker_reads_the_disk_cache_then_keeps_it(tmp_path: Path) -> None:
    _outputs(_runner(tmp_path), "a", 1)
    ref = _runner(tmp_path)  # a fresh worker: nothing in memory
    _outputs(ref, "a", 1)
    _outputs(ref, "a", 1)
    assert (ref.misses, ref.hits, ref.memory_hits) == (0, 1, 1)


def test_the_memory_budget_evicts_the_least_recently_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 64 floats = 256 bytes an entry; a budget of 600 bytes holds two
    monkeypatch.setenv("FIBTUI_REFERENCE_MEMORY_MB", str(600 / 2**20))
    ref = _runner(tmp_path)
    for uuid in ("a", "b"):
        _outputs(ref, uuid, 1, n=64)
    _outputs(ref, "a", 1, n=64)  # a is now the most recent
    _outputs(ref, "c", 1, n=64)  # evicts b
    hits = ref.memory_hits
    _outputs(ref, "a", 1, n=64)
    assert ref.memory_hits == hits + 1
    disk = ref.hits
    _outputs(ref, "b", 1, n=64)
    assert ref.hits == disk + 1 and ref.memory_hits == hits + 1  # b came from disk


def test_no_memory_budget_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIBTUI_REFERENCE_MEMORY_MB", "0")
    ref = _runner(tmp_path)
    _outputs(ref, "a", 1)
    _outputs(ref, "a", 1)
    assert (ref.misses, ref.hits, ref.memory_hits) == (1, 1, 0)


class _FakeNvml:
    NVML_CLOCK_SM = 0

    def __init__(self) -> None:
        self.calls: list[str] = []

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802 - NVML's names
        self.calls.append(f"index:{index}")
        return ("h", index)

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802
        self.calls.append(f"uuid:{uuid}")
        return ("h", uuid)

    def nvmlDeviceGetClockInfo(self, handle, kind):  # noqa: N802
        self.calls.append("clock")
        return 1980

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):  # noqa: N802
        self.calls.append("max")
        return 1980


def test_the_clock_read_before_each_block_asks_nvml_for_the_clock_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _FakeNvml()
    monkeypatch.setattr(envmod, "_nvml", fake)
    monkeypatch.setattr(envmod, "_handles", {})
    assert [envmod.sm_clock_now(0) for _ in range(12)] == [1980] * 12
    assert fake.calls == ["index:0"] + ["clock"] * 12
    fake.calls.clear()
    # a worker given GPU 3 as its device 0 finds its own GPU by UUID
    assert envmod.sm_clock_now(0, "abcd-1234") == 1980
    assert envmod.sm_clock_now(0, "abcd-1234") == 1980
    assert fake.calls == ["uuid:GPU-abcd-1234", "clock", "clock"]


def test_the_eta_choice_is_not_redone_after_every_job() -> None:
    axes = [{"batch_size": b} for b in (1, 2, 4, 8, 16, 32, 64, 128) for _ in range(20)]
    model = EtaModel()
    chosen = 0
    real = model.measure

    def counting() -> str | None:
        nonlocal chosen
        chosen += 1
        return real()

    model.measure = counting  # type: ignore[method-assign]
    t0 = time.perf_counter()
    for i, a in enumerate(axes):
        model.add(a, 0.01 + 0.001 * a["batch_size"], first=i == 0)
        left = model.seconds_left(axes[i + 1 :], 0.5 + 0.01 * i)
        if i >= 3:
            assert left is not None and left >= 0
    assert time.perf_counter() - t0 < 30  # a bound for a loaded machine, not a benchmark
    n = len(axes)
    assert chosen <= EtaModel.SETTLED + (n - EtaModel.SETTLED) // EtaModel.RECHOOSE_EVERY + 1
    # and the choice it keeps is the one a fresh look makes: cost follows batch_size
    assert real() == "batch_size"


def test_the_memory_budget_scales_with_the_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from fibtui.worker import reference

    gib = 2**30
    cuda = torch.device("cuda", 0)
    for total, want in ((141 * 10**9, 141 * 10**9 // 16), (8 * gib, gib), (1024 * gib, 16 * gib)):
        monkeypatch.setattr(
            torch.cuda, "get_device_properties", lambda d, t=total: SimpleNamespace(total_memory=t)
        )
        for raw in (None, "", "auto", "lots"):
            if raw is None:
                monkeypatch.delenv("FIBTUI_REFERENCE_MEMORY_MB", raising=False)
            else:
                monkeypatch.setenv("FIBTUI_REFERENCE_MEMORY_MB", raw)
            assert reference._memory_budget_bytes(cuda) == want, (total, raw)
    monkeypatch.delenv("FIBTUI_REFERENCE_MEMORY_MB", raising=False)
    assert reference._memory_budget_bytes(torch.device("cpu")) == gib
    monkeypatch.setenv("FIBTUI_REFERENCE_MEMORY_MB", "300")
    assert reference._memory_budget_bytes(cuda) == 300 * 2**20
    monkeypatch.setenv("FIBTUI_REFERENCE_MEMORY_MB", "inf")
    assert reference._memory_budget_bytes(torch.device("cpu")) == gib
