"""The answers fibtui keeps in the user's cache folder (fibtui.core.cachefile): nvidia-smi's GPU
list (fibtui.core.backends) and the run listings (fibtui.core.runs.list_runs). A changed key
gives a fresh answer, a corrupt cache file is ignored, and without /proc's description of the
GPUs nvidia-smi is asked every time."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fibtui.core import backends, cachefile, runs, stats
from tests.conftest import REPO

RUNS = REPO / "optimize_ops" / "runs"
GATE_RUN = "20261129-103529_demo_local"  # 3 workloads, paired
SWEEP_RUN = "20261129-103545_demo_local"  # every workload, paired
H200 = "Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-aaaa-1111\nBus Location: \t 0000:00:06.0\n"


# -- nvidia-smi's GPU list --------------------------------------------------------------------


@pytest.fixture
def gpu_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake GPU host: /proc's driver folder, a boot id, /dev nodes, and an nvidia-smi on PATH
    that prints ``smi.out`` and counts its calls in ``smi.calls``."""
    proc = tmp_path / "proc"
    (proc / "gpus" / "0000:00:06.0").mkdir(parents=True)
    (proc / "version").write_text("NVRM version: NVIDIA UNIX Open Kernel Module  580.159.04\n")
    (proc / "gpus" / "0000:00:06.0" / "information").write_text(H200)
    (tmp_path / "boot_id").write_text("boot-1\n")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        f'#!/bin/sh\necho call >> "{tmp_path / "smi.calls"}"\n'
        f'cat "{tmp_path / "smi.out"}"\nexit "$(cat "{tmp_path / "smi.rc"}")"\n'
    )
    smi.chmod(0o755)
    (tmp_path / "smi.out").write_text("0, GPU-aaaa-1111, NVIDIA H200\n")
    (tmp_path / "smi.rc").write_text("0\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(backends, "PROC_NVIDIA", proc)
    monkeypatch.setattr(backends, "BOOT_ID", tmp_path / "boot_id")
    monkeypatch.setattr(backends, "DEV", tmp_path / "dev")
    return tmp_path


def _smi_calls(host: Path) -> int:
    path = host / "smi.calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_nvidia_smi_is_asked_once_while_the_gpus_stay_the_same(gpu_host: Path) -> None:
    first = backends._gpus()
    assert first == [("0", "GPU-aaaa-1111", "NVIDIA H200")] and _smi_calls(gpu_host) == 1
    assert backends._gpus() == first and _smi_calls(gpu_host) == 1  # from the cache
    found = backends.detect()
    assert found.gpu and found.gpu_names == ["NVIDIA H200"] and found.gpu_ids == ["0"]
    assert _smi_calls(gpu_host) == 1


@pytest.mark.parametrize("change", ["gpu", "driver", "boot", "node", "nvidia-smi"])
def test_a_changed_key_asks_nvidia_smi_again(gpu_host: Path, change: str) -> None:
    backends._gpus()
    assert _smi_calls(gpu_host) == 1
    (gpu_host / "smi.out").write_text("0, GPU-bbbb-2222, NVIDIA H200\n")
    if change == "gpu":  # another GPU in the same slot
        info = gpu_host / "proc" / "gpus" / "0000:00:06.0" / "information"
        info.write_text(H200.replace("GPU-aaaa-1111", "GPU-bbbb-2222"))
    elif change == "driver":
        (gpu_host / "proc" / "version").write_text("NVRM version: 590.10\n")
    elif change == "boot":
        (gpu_host / "boot_id").write_text("boot-2\n")
    elif change == "node":  # a container given another set of device nodes
        (gpu_host / "dev" / "nvidia1").write_text("")
    else:  # another nvidia-smi (a driver update replaced it)
        smi = gpu_host / "bin" / "nvidia-smi"
        smi.write_text(smi.read_text() + "\n")
    assert backends._gpus() == [("0", "GPU-bbbb-2222", "NVIDIA H200")]
    assert _smi_calls(gpu_host) == 2
    assert backends._gpus() == [("0", "GPU-bbbb-2222", "NVIDIA H200")]
    assert _smi_calls(gpu_host) == 2  # the new answer is kept in turn


def test_a_corrupt_gpu_cache_file_is_ignored(gpu_host: Path) -> None:
    backends._gpus()
    cache = gpu_host / "cache" / "gpus" / "nvidia-smi.json"
    assert cache.is_file()
    for junk in (b"\x00not json", b"[1, 2]", json.dumps({"version": 1, "entries": []}).encode()):
        cache.write_bytes(junk)
        assert backends._gpus() == [("0", "GPU-aaaa-1111", "NVIDIA H200")]
    key = backends.gpu_key(shutil.which("nvidia-smi") or "")
    assert key is not None
    cache.write_text(json.dumps({"version": 1, "entries": {key: [["0", "GPU-x"]]}}))
    assert backends._gpus() == [("0", "GPU-aaaa-1111", "NVIDIA H200")]
    assert _smi_calls(gpu_host) == 5  # the first call, then every bad file sent it there
    assert backends._gpus() == [("0", "GPU-aaaa-1111", "NVIDIA H200")]
    assert _smi_calls(gpu_host) == 5  # and was replaced by a good one


def test_without_proc_nvidia_smi_is_asked_every_time(
    gpu_host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backends, "PROC_NVIDIA", gpu_host / "no-such-proc")
    for n in (1, 2, 3):
        assert backends._gpus() == [("0", "GPU-aaaa-1111", "NVIDIA H200")]
        assert _smi_calls(gpu_host) == n
    assert not (gpu_host / "cache" / "gpus").exists()


def test_a_failed_nvidia_smi_is_not_kept(gpu_host: Path) -> None:
    (gpu_host / "smi.rc").write_text("9\n")
    assert backends._gpus() == [] and backends._gpus() == []
    assert _smi_calls(gpu_host) == 2
    (gpu_host / "smi.rc").write_text("0\n")
    assert backends._gpus() == [("0", "GPU-aaaa-1111", "NVIDIA H200")]


def test_cuda_visible_devices_applies_to_a_cached_answer(
    gpu_host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backends._gpus()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa")
    found = backends.detect()
    assert found.gpu_ids == ["GPU-aaaa"] and _smi_calls(gpu_host) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert not backends.detect().gpu and _smi_calls(gpu_host) == 1


# -- run listings -----------------------------------------------------------------------------


def _need_round() -> None:
    assert (RUNS / SWEEP_RUN / "journal.jsonl").is_file(), (
        "the archived demo round (optimize_ops/runs/) is committed with the repository and is missing"
    )


def _copy_run(root: Path, src: str, run_id: str) -> Path:
    """A copy of an archived run renamed ``run_id`` (journal header and run.json say so too)."""
    dest = root / "runs" / run_id
    dest.mkdir(parents=True)
    lines = (RUNS / src / "journal.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    header["run_id"] = run_id
    (dest / "journal.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    record = json.loads((RUNS / src / "run.json").read_text())
    record["run_id"] = run_id
    (dest / "run.json").write_text(json.dumps(record))
    return dest


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An archive with the demo's full sweep and five later representative gates, and a cache
    that keeps what it reads at once (files count as settled as soon as they are written)."""
    _need_round()
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cachefile, "SETTLE_S", -1.0)
    root = tmp_path / "optimize_ops"
    _copy_run(root, SWEEP_RUN, "20261130-000000_demo_local")
    for i in range(5):
        _copy_run(root, GATE_RUN, f"20261130-00010{i}_demo_local")
    return root


def _count_calls(monkeypatch: pytest.MonkeyPatch, module, name: str) -> list[object]:
    calls: list[object] = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args[0] if args else None)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_listing_reads_each_journal_once_until_it_changes(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _count_calls(monkeypatch, runs, "read_journal")
    first = [r.to_json() for r in runs.list_runs(archive)]
    assert len(first) == 6 and len(reads) == 6
    assert {r["state"] for r in first} == {"complete"}
    assert [r.to_json() for r in runs.list_runs(archive)] == first
    assert len(reads) == 6  # nothing parsed again
    # a run that gets another line is read again, and the listing says what it now holds
    gate = archive / "runs" / "20261130-000104_demo_local" / "journal.jsonl"
    lines = gate.read_text().splitlines()
    gate.write_text("\n".join(lines[:-3]) + "\n")  # two results and the end line gone
    listed = {r.run_id: r for r in runs.list_runs(archive)}
    assert len(reads) == 7 and listed["20261130-000104_demo_local"].jobs_done == 16
    assert listed["20261130-000104_demo_local"].state == "interrupted"
    assert listed["20261130-000103_demo_local"].state == "complete"


def test_a_cached_listing_still_sees_a_live_lock(archive: Path) -> None:
    folder = archive / "runs" / "20261130-000104_demo_local"
    journal = folder / "journal.jsonl"
    journal.write_text("\n".join(journal.read_text().splitlines()[:-1]) + "\n")  # no end line
    assert {r.run_id: r.state for r in runs.list_runs(archive)}[folder.name] == "complete"
    (folder / "lock").write_text(str(os.getpid()))
    assert {r.run_id: r.state for r in runs.list_runs(archive)}[folder.name] == "running"


def test_a_corrupt_listing_cache_is_ignored(archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = [r.to_json() for r in runs.list_runs(archive)]
    files = list((archive.parent / "cache" / "runs").glob("*.json"))
    assert len(files) == 1
    reads = _count_calls(monkeypatch, runs, "read_journal")
    entries = json.loads(files[0].read_text())["entries"]
    name = "20261130-000102_demo_local"
    one_bad = json.loads(json.dumps(entries))
    one_bad[name]["journal"]["facts"]["done"] = "18"  # not of the shape the cache writes
    for junk in (
        "{not json",
        json.dumps({"version": 1, "entries": None}),
        json.dumps({"version": 99, "entries": entries}),
        json.dumps({"version": 1, "entries": one_bad}),
    ):
        files[0].write_text(junk)
        assert [r.to_json() for r in runs.list_runs(archive)] == expected
    assert len(reads) == 6 * 3 + 1  # three unusable files, and one entry of the wrong shape
    assert [r.to_json() for r in runs.list_runs(archive)] == expected
    assert len(reads) == 6 * 3 + 1  # the last listing wrote a good file again


def test_a_file_still_changing_is_not_kept(archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cachefile, "SETTLE_S", 3600.0)
    reads = _count_calls(monkeypatch, runs, "read_journal")
    runs.list_runs(archive)
    runs.list_runs(archive)
    assert len(reads) == 12


def test_latest_rows_reads_only_the_record_it_returns(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fibtui.core.results import fibtui_run

    definition = "demo_gdn_decode_qk4_v8_d128_k_last"
    runs.list_runs(archive)  # the cache knows every run
    loads = _count_calls(monkeypatch, fibtui_run, "load_run_record")
    found = runs.latest_rows(archive, definition, workloads=50)
    assert found is not None and "20261130-000000_demo_local" in found[1]
    assert len({r.uuid for r in found[0]}) == 50
    assert [Path(str(p)).parent.name for p in loads] == ["20261130-000000_demo_local"]
    # with no full run, the newest partial one answers (as before the cache)
    shutil.rmtree(archive / "runs" / "20261130-000000_demo_local")
    found = runs.latest_rows(archive, definition, workloads=50)
    assert found is not None and "20261130-000104_demo_local" in found[1]
    found = runs.latest_rows(archive, definition)
    assert found is not None and "20261130-000104_demo_local" in found[1]
    assert runs.latest_rows(archive, definition, timing_kinds=("cpu-interpreter",)) is None


def test_aa_sessions_open_only_same_code_pairs(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert stats.aa_sessions(archive) == []
    record_path = archive / "runs" / "20261130-000103_demo_local" / "run.json"
    record = json.loads(record_path.read_text())
    for s in record["solutions"]:
        s["source_hash"] = "same"
    record_path.write_text(json.dumps(record))  # a changed run.json is read again
    sessions = stats.aa_sessions(archive)
    assert [s.source for s in sessions] == ["20261130-000103_demo_local"]


# -- a gate's regime analysis, once per command -------------------------------------------------


def test_a_gate_verdict_takes_the_shares_its_start_analysed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fibtui run --workloads rep analyses the newest full run for its representatives, then its
    verdict names the bands' latency shares of that same analysis: the rows are analysed once,
    and the shares are the ones a fresh analysis gives. A changed run record is analysed again."""
    from fibtui.core import plan, regimes
    from fibtui.core.demo import create_demo_workspace
    from fibtui.core.workspace import open_workspace
    from fibtui.services import decide

    _need_round()
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    root = create_demo_workspace(tmp_path / "demo", git_init=False)
    ws = open_workspace(root)
    definition = ws.config_for(None).definition
    monkeypatch.setattr(regimes.analysis, "_SHARES_SEEN", {})
    fresh = decide.band_shares(ws, definition)  # nothing remembered: analysed here
    assert fresh[0] and SWEEP_RUN in str(fresh[1])
    analyses = _count_calls(monkeypatch, regimes, "analyze")
    reps = plan.gate_representatives(ws)
    assert len(reps) == 3 and len(analyses) == 1
    assert decide.band_shares(ws, definition) == fresh
    assert len(analyses) == 1  # the verdict's shares came from the start's analysis
    sweep = root / "optimize_ops" / "runs" / SWEEP_RUN / "run.json"
    sweep.write_text(sweep.read_text())  # the same rows, but another file
    assert decide.band_shares(ws, definition) == fresh
    assert len(analyses) == 2
