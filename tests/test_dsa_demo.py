"""The second bundled demo (issue 16): a DSA top-k indexer of our own whose page tables and
sequence lengths are safetensors, judged by the top-k indexer evaluator on Triton's CPU
interpreter. The candidate that returns the same set in another order passes; the one that
repeats an index fails; an elementwise check would have failed the reordered one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fibtui.core.demo import create_demo_workspace
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.slow
torch = pytest.importorskip(
    "torch", reason="the gpu extra (torch) is not installed: the worker cannot run here"
)

NAME = "dsa_topk_indexer_demo_h4_d32_topk32_ps16"


@pytest.fixture
def dsa_ws(tmp_path: Path) -> Path:
    return create_demo_workspace(tmp_path / "dsa", operator="dsa_topk")


def test_the_committed_demo_dataset_is_what_its_script_writes() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "data" / "make_dsa_demo.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_reordered_top_k_passes_and_a_repeated_index_fails(
    capsys, dsa_ws: Path, monkeypatch
) -> None:
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(dsa_ws.parent / "cache"))
    code, out, err = run_cli(
        capsys,
        "run",
        "--backend",
        "interpreter",
        "--workloads",
        "all",
        "--workspace",
        str(dsa_ws),
        "--solution",
        str(dsa_ws / "candidates" / "v2_token_order"),
        "--baseline",
        str(dsa_ws),
        "--json",
    )
    assert code == 0, err[-2000:]
    record = json.loads(out)
    assert record["summary"]["complete"] and len(record["jobs"]) == 24
    assert {j["status"] for j in record["jobs"]} == {"PASSED"}
    assert {j["correctness"]["evaluator"] for j in record["jobs"]} == {"dsa_topk_indexer"}
    code, out, err = run_cli(
        capsys,
        "run",
        "--backend",
        "interpreter",
        "--workloads",
        "all",
        "--workspace",
        str(dsa_ws),
        "--solution",
        str(dsa_ws / "candidates" / "bad_repeats"),
        "--json",
    )
    bad = json.loads(out)["jobs"]
    assert code == 1
    failed = [j for j in bad if j["status"] != "PASSED"]
    assert failed and all(
        j["status"] == "INCORRECT_NUMERICAL" and "repeated indices" in j["error"] for j in failed
    )
    # the workloads it passes are the ones whose sequences are all shorter than k (no full row to repeat in)
    assert len(failed) < len(bad)


def test_an_elementwise_check_would_fail_the_reordered_candidate(
    dsa_ws: Path, tmp_path: Path
) -> None:
    """The same worker, the same inputs: with the default (elementwise) evaluator forced, the
    token-ordered candidate is INCORRECT_NUMERICAL; with the one the registry picks, PASSED."""
    from fibtui.core.dataset import Dataset
    from fibtui.worker.engine import execute

    ds = Dataset(dsa_ws / "dataset")
    definition = ds.definition(NAME).raw
    wl = next(
        w.to_json()
        for w in ds.workloads(NAME)
        if w.axes["batch_size"] == 8 and w.axes["max_num_pages"] == 8
    )
    source = (dsa_ws / "candidates" / "v2_token_order" / "kernel.py").read_text()
    sol = {
        "id": "candidate-0",
        "name": "v2",
        "spec": {
            "language": "python",
            "entry_point": "kernel.py::topk_indexer",
            "destination_passing_style": False,
        },
        "sources": [{"path": "kernel.py", "content": source}],
    }

    def judged(evaluator: str | None) -> dict:
        config = {
            "backend": "interpreter",
            "device": "cpu",
            "correctness_trials": 1,
            "evaluator": evaluator,
            "plan": {"calls_per_block": 1, "blocks": 1, "warmup_calls": 0},
            "cache_dir": str(tmp_path / "cache"),
            "dataset_root": str(dsa_ws / "dataset"),
        }
        out = execute(
            {
                "config": config,
                "definition": definition,
                "solutions": [sol],
                "jobs": [
                    {"job_id": "0", "workload": wl, "repeat": 0, "solutions": ["candidate-0"]}
                ],
            }
        )
        return out["jobs"][0]["results"][0]

    official = judged(None)
    assert (
        official["status"] == "PASSED"
        and official["correctness"]["evaluator"] == "dsa_topk_indexer"
    )
    elementwise = judged("default")
    assert (
        elementwise["status"] == "INCORRECT_NUMERICAL"
        and elementwise["correctness"]["evaluator"] == "default"
    )


def test_safetensors_inputs_are_read_once_per_worker_and_copied_per_input_set(
    dsa_ws: Path, monkeypatch
) -> None:
    from fibtui.core.dataset import Dataset
    from fibtui.worker import inputs as inputs_mod
    from fibtui.worker.evaluators import for_definition

    ds = Dataset(dsa_ws / "dataset")
    definition = ds.definition(NAME).raw
    wl = next(iter(ds.workloads(NAME))).to_json()
    reads = []
    real = inputs_mod.read_safetensors
    monkeypatch.setattr(
        inputs_mod, "read_safetensors", lambda path, key: reads.append(key) or real(path, key)
    )
    maker = inputs_mod.InputMaker(
        definition, "cpu", str(dsa_ws / "dataset"), for_definition(definition).prepare_inputs
    )
    first = maker.make(wl, 1)
    second = maker.make(wl, 2)
    assert sorted(reads) == ["block_table", "seq_lens"]  # once each, for both input sets
    assert torch.equal(first[4], second[4]) and first[4].data_ptr() != second[4].data_ptr()
    first[4].fill_(0)  # a kernel that scribbles on its input cannot change the next set
    assert not torch.equal(maker.make(wl, 3)[4], first[4])
    assert maker.filled == []  # the workload gives its structured inputs: nothing is made up
    assert first[1].dtype == torch.int8 and not torch.equal(
        first[1], second[1]
    )  # packed cache, per seed
