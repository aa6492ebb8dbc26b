"""A kernel that needs another GPU architecture is UNSUPPORTED_HERE, never the kernel's failure:
the architecture rules, what error messages and compiler logs show, the fat binary inside a built
library (real nvcc objects in tests/fixtures/fatbin), and a run through the CLI whose candidate
needs sm_100a (its worker told it runs on an sm_90 GPU)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from fibtui.core.gpuarch import (
    Arch,
    MachineLimit,
    fatbin_entries,
    library_limit,
    limit_from_text,
    runs_on_device,
)
from tests.conftest import run_cli
from tests.runner_helpers import make_tiny_workspace

FIXTURES = Path(__file__).parent / "fixtures" / "fatbin"
H200 = Arch(9, 0)
B200 = Arch(10, 0)

# what the CuTe DSL says when a tcgen05 op is built on a Hopper GPU (its OpError's message)
DSL_ERROR = (
    "OpError: expects arch to be one of [Arch.sm_100a, Arch.sm_100f, Arch.sm_103a], but got "
    "Arch.sm_90a\n💡 Suggestion: Ensure env CUTE_DSL_ARCH matches your GPU architecture"
)
# the same check in nvidia-cutlass-dsl 4.8.1 (its DSLUserCodeError, printed on this machine with
# CUTE_DSL_ARCH=sm_90a): colours and base_dsl.Arch names
DSL_481_ERROR = (
    "\x1b[91m\x1b[1merror:\x1b[0m expects arch to be one of [base_dsl.Arch.sm_100a, "
    "base_dsl.Arch.sm_100f, base_dsl.Arch.sm_110a, base_dsl.Arch.sm_110f, base_dsl.Arch.sm_103a, "
    "base_dsl.Arch.sm_103f, base_dsl.Arch.sm_107a, base_dsl.Arch.sm_107f], but got sm_90a\n"
    "  \x1b[92msuggestion:\x1b[0m Ensure env CUTE_DSL_ARCH matches your GPU architecture"
)
# what nvcc 13.0's ptxas printed for an inline tcgen05.alloc built for sm_90 (run on this machine)
PTXAS_LOG = (
    "ptxas /tmp/tmpxft_000027cb_00000000-6_t.ptx, line 29; error   : Instruction "
    "'tcgen05.alloc' not supported on .target 'sm_90'\n"
    "ptxas /tmp/tmpxft_000027cb_00000000-6_t.ptx, line 29; error   : Feature '.cta_group::1' "
    "not supported on .target 'sm_90'\nptxas fatal   : Ptx assembly aborted due to errors\n"
)


def test_the_architecture_rules_are_cudas() -> None:
    sm90, sm90a = Arch.parse("sm_90"), Arch.parse("Arch.sm_90a")
    assert (
        sm90 == H200 and sm90a == Arch(9, 0, "a") and Arch.parse("compute_100a") == Arch(10, 0, "a")
    )
    assert Arch.parse("no arch here") is None
    # a cubin runs within its major version, from its minor up
    assert Arch(8, 0).runs_on(Arch(8, 6)) and not Arch(8, 6).runs_on(Arch(8, 0))
    assert not Arch(8, 0).runs_on(H200) and not Arch(9, 0).runs_on(B200)
    # PTX is compiled by the driver for any newer GPU
    assert Arch(8, 0).runs_on(H200, ptx=True) and not Arch(10, 0).runs_on(H200, ptx=True)
    # arch-specific code runs on that GPU alone; family-specific code within its family
    assert Arch(10, 0, "a").runs_on(B200) and not Arch(10, 0, "a").runs_on(Arch(10, 3))
    assert not Arch(9, 0, "a").runs_on(B200, ptx=True)
    assert Arch(10, 0, "f").runs_on(Arch(10, 3)) and not Arch(10, 0, "f").runs_on(Arch(12, 0))


@pytest.mark.parametrize(
    ("name", "labels", "on_h200"),
    [
        ("k90.o", ["sm_90", "compute_90"], True),
        ("k100a.o", ["sm_100a"], False),
        ("k100az.o", ["sm_100a"], False),  # a compressed image: its header is read all the same
        ("k120fptx.o", ["compute_120f"], False),
        ("k100a.fatbin", ["sm_100a"], False),  # a raw fat binary, not inside an ELF
    ],
)
def test_the_fat_binary_says_which_gpus_a_build_runs_on(
    name: str, labels: list[str], on_h200: bool
) -> None:
    entries = fatbin_entries(FIXTURES / name)
    assert [e.label for e in entries] == labels
    assert runs_on_device(entries, H200) is on_h200
    limit = library_limit(FIXTURES / name, H200)
    if on_h200:
        assert limit is None
    else:
        assert limit is not None and limit.kind == "arch" and limit.has == "sm_90"
        assert "holds code for" in limit.evidence


def test_files_without_gpu_code_say_nothing(tmp_path: Path) -> None:
    (tmp_path / "plain.so").write_bytes(b"\x7fELF\x02\x01" + b"\0" * 200)
    (tmp_path / "text.txt").write_text("hello")
    assert fatbin_entries(tmp_path / "plain.so") == []
    assert fatbin_entries(tmp_path / "text.txt") == []
    assert fatbin_entries(tmp_path / "missing.so") == []
    assert library_limit(tmp_path / "plain.so", H200) is None  # nothing known: no limit claimed


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc here")
def test_a_build_made_now_for_sm_100a_reads_as_sm_100a(tmp_path: Path) -> None:
    obj = tmp_path / "k.o"
    subprocess.run(
        [
            "nvcc",
            "-c",
            "-gencode",
            "arch=compute_100a,code=sm_100a",
            str(FIXTURES / "k.cu"),
            "-o",
            str(obj),
        ],
        check=True,
        capture_output=True,
    )
    assert [e.label for e in fatbin_entries(obj)] == ["sm_100a"]


def test_error_messages_that_show_a_missing_architecture() -> None:
    dsl = limit_from_text(DSL_ERROR, Arch(9, 0, "a"))
    assert (
        dsl is not None and dsl.needs == ("sm_100a", "sm_100f", "sm_103a") and dsl.has == "sm_90a"
    )
    assert dsl.runs_on("sm_100") and not dsl.runs_on("sm_90")
    dsl481 = limit_from_text(DSL_481_ERROR, H200)
    assert dsl481 is not None and dsl481.needs[:2] == ("sm_100a", "sm_100f")
    assert dsl481.has == "sm_90a" and len(dsl481.needs) == 8 and dsl481.runs_on("sm_100")
    ptxas = limit_from_text(PTXAS_LOG, H200)
    assert ptxas is not None and ptxas.has == "sm_90" and "sm_100a" in ptxas.needs
    assert "tcgen05.alloc" in ptxas.evidence
    # wgmma built for plain sm_90 on a Hopper GPU: this GPU has it, the build flags do not
    wgmma = "ptxas error   : Instruction 'wgmma.fence' not supported on .target 'sm_90'"
    assert limit_from_text(wgmma, H200) is None
    requires = limit_from_text("error: Feature 'x' requires .target sm_100a or higher", H200)
    assert requires is not None and requires.needs == ("sm_100a",)
    image = limit_from_text(
        "RuntimeError: CUDA error: no kernel image is available for execution on the device", H200
    )
    assert image is not None and image.needs == () and image.has == "sm_90"
    own = limit_from_text(
        'kernel.cu:2:2: error: #error "this kernel needs sm_100a (tcgen05)"', H200
    )
    assert own is not None and own.needs == ("sm_100a",)
    # the same #error on the GPU it names is no limit of this machine; other errors are none
    assert limit_from_text('#error "needs sm_90a"', H200) is None
    assert limit_from_text("RuntimeError: CUDA error: an illegal memory access", H200) is None
    assert limit_from_text("IndexError: index 5 is out of bounds for sm_100 table", H200) is None


def test_a_limit_round_trips_and_says_what_it_needs() -> None:
    limit = MachineLimit("arch", ("sm_100a",), "sm_90", evidence="line", remedy="use a B200")
    assert MachineLimit.from_json(json.loads(json.dumps(limit.to_json()))) == limit
    assert limit.describe() == "needs sm_100a; this GPU is sm_90 (use a B200)"
    assert MachineLimit.from_json({"needs": []}) is None
    assert not MachineLimit("headers", ("cute/tensor.hpp",)).runs_on("sm_100")


FAKE_DSL_KERNEL = """import torch


class OpError(Exception):
    pass


def scale(x, alpha, y):
    # what the CuTe DSL does when a tcgen05 op is traced for this GPU
    raise OpError(
        "expects arch to be one of [Arch.sm_100a, Arch.sm_103a], but got Arch.sm_90a"
    )
"""


def python_candidate(root: Path, name: str, kernel: str) -> Path:
    """``candidates/<name>/``: a Python solution of the tiny definition (config.toml and
    solution/python/kernel.py)."""
    cand = root / "candidates" / name
    (cand / "solution" / "python").mkdir(parents=True)
    (cand / "solution" / "python" / "kernel.py").write_text(kernel)
    (cand / "config.toml").write_text(
        f'[solution]\nname = "{name}"\ndefinition = "tiny_scale"\nauthor = "t"\n'
        '[build]\nlanguage = "python"\nentry_point = "kernel.py::scale"\n'
    )
    return cand


@pytest.mark.slow
def test_a_kernel_that_needs_sm_100a_is_unsupported_here_with_what_it_needs(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through ``fibtui run`` on Triton's interpreter, its worker told it is an sm_90 GPU: the
    candidate's rows are UNSUPPORTED_HERE with the architecture needed and present (never
    RUNTIME_ERROR), the baseline is judged, the verdict is NOT_JUDGED, the exit code is 3 and
    the summary names the B200 and the command that sends them there."""
    monkeypatch.setenv("FIBTUI_TEST_DEVICE_ARCH", "sm_90")
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 3))
    cand = python_candidate(root, "v3_tcgen05", FAKE_DSL_KERNEL)
    args = ("run", "--workspace", str(root), "--backend", "interpreter", "--no-daemon")
    code, out, err = run_cli(
        capsys,
        *args,
        "--workloads",
        "all",
        "--solution",
        str(cand),
        "--baseline",
        str(root),
        "--json",
    )
    assert code == 3, err
    record = json.loads(out)
    cand_rows = [j for j in record["jobs"] if j["role"] == "candidate"]
    assert {j["status"] for j in cand_rows} == {"UNSUPPORTED_HERE"}
    assert all(j["limit"]["needs"] == ["sm_100a", "sm_103a"] for j in cand_rows)
    assert all(
        j["limit"]["has"] == "sm_90a" and "RUNTIME_ERROR" not in j["error"] for j in cand_rows
    )
    assert {j["status"] for j in record["jobs"] if j["role"] == "baseline"} == {"PASSED"}
    assert record["comparison"]["verdict"] == "NOT_JUDGED"
    [group] = record["not_judged"]
    assert group["kind"] == "arch" and group["on_b200"] is True and group["jobs"] == 2
    # the text summary: what it needs, not a kernel failure, and where it can run
    code, out, _ = run_cli(capsys, *args, "--workloads", "all", "--solution", str(cand))
    assert code == 3
    text = " ".join(out.split())
    assert (
        "need sm_100a or sm_103a; this GPU is sm_90a: not judged here, not a kernel failure" in text
    )
    assert "fibtui run --send-unsupported" in text


REAL_DSL_KERNEL = """def scale(x, alpha, y):
    # a kernel written for the B200: it builds a tcgen05 MMA op (the CuTe DSL checks the GPU's
    # architecture when the op is made, as it does while tracing a @cute.kernel)
    import cutlass
    from cutlass.cute.nvgpu import OperandMajorMode, tcgen05

    tcgen05.MmaF16BF16Op(
        cutlass.BFloat16,
        cutlass.Float32,
        (128, 128, 16),
        tcgen05.CtaGroup.ONE,
        tcgen05.OperandSource.SMEM,
        OperandMajorMode.K,
        OperandMajorMode.K,
    )
"""


@pytest.mark.slow
def test_the_cute_dsls_own_arch_check_is_unsupported_here(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real CuTe DSL (when installed: flashinfer-python brings it) told it runs on sm_90a
    (``CUTE_DSL_ARCH``, as it reads a Hopper GPU) refuses a tcgen05 op with its own error; the
    row is UNSUPPORTED_HERE with the Blackwell architectures that error lists."""
    pytest.importorskip("cutlass.cute.nvgpu.tcgen05")
    monkeypatch.setenv("FIBTUI_TEST_DEVICE_ARCH", "sm_90")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    cand = python_candidate(root, "v4_umma", REAL_DSL_KERNEL)
    code, out, err = run_cli(
        capsys,
        *("run", "--workspace", str(root), "--backend", "interpreter", "--no-daemon"),
        *("--workloads", "all", "--solution", str(cand), "--json"),
    )
    assert code == 3, err
    [job] = json.loads(out)["jobs"]
    assert job["status"] == "UNSUPPORTED_HERE", job
    assert "sm_100a" in job["limit"]["needs"] and job["limit"]["has"] == "sm_90a"
    assert "expects arch to be one of" in job["limit"]["evidence"]


def _arch_limited_run(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A finished interpreter run (its worker told it is an sm_90 GPU) whose candidate needs
    sm_100a on every workload."""
    monkeypatch.setenv("FIBTUI_TEST_DEVICE_ARCH", "sm_90")
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 3))
    cand = python_candidate(root, "v3_tcgen05", FAKE_DSL_KERNEL)
    code, out, err = run_cli(
        capsys,
        *("run", "--workspace", str(root), "--backend", "interpreter", "--no-daemon", "--json"),
        *("--workloads", "all", "--solution", str(cand), "--baseline", str(root)),
    )
    assert code == 3, err
    return root, json.loads(out)["run_id"]


@pytest.mark.slow
def test_what_this_gpu_cannot_run_goes_to_a_b200_in_the_same_run(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--send-unsupported``: the plan names the jobs (every solution of each workload, so no
    pair spans two GPUs) and the worst case; without Modal credentials it says so in one line and
    sends nothing; sent (the B200's answers from a stand-in caller), the same run holds one record
    whose rows name the B200, and the paired verdict pairs them."""
    from fibtui.core.workspace import open_workspace
    from fibtui.runners.split import plan_send, prepare_send
    from tests.test_modal import FakeCaller

    root, run_id = _arch_limited_run(tmp_path, capsys, monkeypatch)
    ws = open_workspace(root)
    send = plan_send(ws, run_id)
    assert send is not None and len(send.keys) == 4 and len(send.workloads) == 2
    assert {g.needs for g in send.groups} == {("sm_100a", "sm_103a")}
    code, out, err = run_cli(
        capsys, "run", "--workspace", str(root), "--send-unsupported", run_id, "--plan", "--json"
    )
    assert code == 0, err
    plan = json.loads(out)
    assert plan["jobs"] == 4 and plan["worst_case_cost_usd"] > 0
    assert "need sm_100a or sm_103a" in err and "worst case" in err
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "none.toml"))
    code, _, err = run_cli(
        capsys, "run", "--workspace", str(root), "--send-unsupported", run_id, "--yes"
    )
    assert code == 2 and "needs Modal credentials" in err and "Traceback" not in err
    # sent, with a stand-in for Modal's B200 containers
    prepared = prepare_send(ws, send, modal_in_process=True)
    prepared.runner.caller = FakeCaller()
    record = prepared.runner.run(lambda event: None)
    assert record.run_id == run_id and record.summary.complete
    assert {(j.role, j.status, j.device) for j in record.jobs} == {
        ("baseline", "PASSED", "NVIDIA B200"),
        ("candidate", "PASSED", "NVIDIA B200"),
    }
    assert plan_send(ws, run_id) is None  # nothing left to send
    code, out, err = run_cli(capsys, "compare", run_id, "--workspace", str(root), "--json")
    assert code in (0, 1), err
    assert json.loads(out)["workloads"] == 2  # both workloads paired, each on the B200


def test_a_pair_never_spans_two_gpus() -> None:
    from fibtui.core.stats import pair_workloads
    from tests.typed_rows import typed_row

    def row(uuid: str, gpu: str, lat: float):
        return typed_row(
            {
                "uuid": uuid,
                "status": "PASSED",
                "latency_ms": lat,
                "repeat": 0,
                "timing": {"kind": "cupti", "environment": {"gpu": gpu}},
            }
        )

    base = [row("a", "NVIDIA H200", 1.0), row("b", "NVIDIA B200", 1.0)]
    cand = [row("a", "NVIDIA H200", 0.9), row("b", "NVIDIA H200", 0.5)]
    pairs, unpaired = pair_workloads(base, cand)
    assert [p.uuid for p in pairs] == ["a"] and unpaired == ["b"]


@pytest.mark.slow
def test_backend_auto_runs_here_then_says_what_it_would_send(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--backend auto`` on a machine without Modal credentials: the run is made on this
    machine's backend, its B200-only jobs are named with the plan and the worst case, "not
    sent" says why, and the exit code is the run's (3: nothing failed, some not judged here)."""
    monkeypatch.setenv("FIBTUI_TEST_DEVICE_ARCH", "sm_90")
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "none.toml"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    cand = python_candidate(root, "v3_tcgen05", FAKE_DSL_KERNEL)
    code, out, err = run_cli(
        capsys,
        *("run", "--workspace", str(root), "--backend", "auto", "--no-daemon", "--yes"),
        *("--workloads", "all", "--solution", str(cand), "--baseline", str(root)),
    )
    assert code == 3, err
    text = " ".join((out + err).split())
    assert "1 workload(s) of run" in text and "need sm_100a or sm_103a" in text
    assert "not sent: sending to Modal's B200 needs Modal credentials" in text


@pytest.mark.slow
async def test_the_tui_offers_the_b200_after_a_run_with_jobs_this_gpu_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gate in the TUI whose candidate needs Blackwell: at the run's end one dialog says how
    many workloads need which architecture, the jobs and the worst case; "n" sends nothing,
    the palette's entry asks again, "y" runs them on the B200 (a stand-in for its containers)
    into the same run, whose rows then name the B200."""
    from fibtui.core.runs import build_record, read_journal, run_dir
    from fibtui.core.workspace import open_workspace
    from fibtui.runners import split
    from fibtui.runners.events import RunFinished
    from fibtui.ui import messages
    from fibtui.ui.app import make_app
    from fibtui.ui.screens.confirm import ConfirmScreen
    from tests.test_modal import FakeCaller

    monkeypatch.setenv("FIBTUI_TEST_DEVICE_ARCH", "sm_90")
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 3))
    python_candidate(root, "v3_tcgen05", FAKE_DSL_KERNEL)
    real_prepare = split.prepare_send
    sent: list = []

    def stand_in(ws, send, modal_in_process=False):
        prepared = real_prepare(ws, send, modal_in_process=True)
        prepared.runner.caller = FakeCaller()
        sent.append(send)
        return prepared

    monkeypatch.setattr(split, "prepare_send", stand_in)
    events: list = []
    app = make_app(open_workspace(root))
    app.run_control.note_acknowledged = True

    def finished() -> list:  # a bubbling message reaches the hook once per node it passes
        return list(
            {
                id(m.event): m.event
                for m in events
                if isinstance(m, messages.RunEvent) and isinstance(m.event, RunFinished)
            }.values()
        )

    async def until(condition, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "timed out waiting"
            await pilot.pause(0.05)

    async with app.run_test(size=(80, 24), message_hook=events.append) as pilot:
        gates, baselines = app.run_control.gates.choices()
        app.run_control.gates.gate_choice = next(c for c in gates if c.label == "v3_tcgen05")
        app.run_control.gates.base_choice = next(c for c in baselines if c.key == "solution")
        await pilot.press("g")
        await until(lambda: isinstance(app.screen, ConfirmScreen))
        dialog = app.screen
        said = " ".join([dialog._title, *(v for _, v in dialog._facts)])
        assert "need sm_100a or sm_103a" in said and "Modal's B200" in said, said
        assert "worst case" in said, said
        await pilot.press("n")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen) and sent == []
        run_id = app.pane("runs").shown_run
        assert run_id is not None and len(finished()) == 1
        app.action_send_unsupported()  # the palette's entry
        await until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(lambda: len(finished()) == 2)
    assert len(sent) == 1 and sent[0].run_id == run_id
    ws = open_workspace(root)
    folder = run_dir(ws.archive_root, run_id)
    record = build_record(folder, read_journal(folder / "journal.jsonl"))
    sent_rows = {(j.role, j.status, j.device) for j in record.jobs if j.uuid in sent[0].workloads}
    assert sent_rows == {
        ("baseline", "PASSED", "NVIDIA B200"),
        ("candidate", "PASSED", "NVIDIA B200"),
    }
    assert split.plan_send(ws, run_id) is None
