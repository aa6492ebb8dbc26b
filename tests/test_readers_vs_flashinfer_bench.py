"""With the `bench` extra installed: fibtui's readers accept exactly what flashinfer-bench's own
models accept, on the shared dataset and on the demo's, and both refuse the same broken objects.
(Skipped where flashinfer-bench is not installed: it is an optional extra that pulls torch.)"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fibtui.core.dataset import _Ctx, parse_definition, parse_workload
from fibtui.core.errors import InputError
from tests.conftest import DEMO, SHARED

fib_data = pytest.importorskip(
    "flashinfer_bench.data", reason="the bench extra (flashinfer-bench) is not installed"
)


def datasets() -> list[Path]:
    out = [DEMO / "dataset"]
    if (SHARED / "datasets" / "flashinfer-trace").is_dir():
        out.append(SHARED / "datasets" / "flashinfer-trace")
    return out


def fib_accepts(model, obj) -> bool:
    try:
        model.model_validate(obj)
        return True
    except Exception:  # noqa: BLE001 - pydantic's ValidationError and friends
        return False


def ours_accepts(fn, obj) -> bool:
    try:
        fn(obj)
        return True
    except InputError:
        return False


def _definition(obj):
    return parse_definition(obj, "x.json")


def _workload_line(obj):
    ctx = _Ctx("x.jsonl", 1)
    ctx.string(obj, "definition")
    return parse_workload(ctx, ctx.obj(ctx.req(obj, "workload"), "workload"), None)


@pytest.mark.parametrize("root", datasets(), ids=lambda p: p.parent.name)
def test_every_definition_and_workload_agrees(root: Path) -> None:
    for path in sorted((root / "definitions").rglob("*.json")):
        obj = json.loads(path.read_text())
        assert ours_accepts(_definition, obj) == fib_accepts(fib_data.Definition, obj) is True
    for path in sorted((root / "workloads").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            assert ours_accepts(_workload_line, obj) == fib_accepts(fib_data.Trace, obj) is True


BROKEN = [
    lambda d: d.pop("name"),
    lambda d: d.pop("reference"),
    lambda d: d["axes"]["seq_len"].update(value=-1),
    lambda d: d["inputs"]["q"].update(shape=["batch_size", "nope"]),
    lambda d: d.update(reference="x = 1"),
]


@pytest.mark.parametrize("mutate", BROKEN)
def test_both_refuse_the_same_broken_definitions(mutate) -> None:
    obj = json.loads(next((DEMO / "dataset" / "definitions").rglob("*.json")).read_text())
    broken = copy.deepcopy(obj)
    mutate(broken)
    assert not ours_accepts(_definition, broken)
    assert not fib_accepts(fib_data.Definition, broken)


def test_traces_of_a_wrong_output_as_flashinfer_bench_writes_them(tmp_path: Path, capsys) -> None:
    """flashinfer-bench's own models serialize a wrong output's errors as ``"Infinity"`` and
    ``"NaN"`` strings (``ser_json_inf_nan="strings"``), with no performance: fibtui reads the
    file it wrote, under ``traces/<author>/<op_type>/<definition>.jsonl``, through ``results
    show`` as a user would."""
    import math

    from fibtui.core.results import load_results
    from tests.conftest import run_cli

    env = {"hardware": "NVIDIA H200", "libs": {"torch": "2.11.0"}}
    workload = {"uuid": "w-inf", "axes": {"n": 4}, "inputs": {"x": {"type": "random"}}}
    lines = []
    for uuid, err in (("w-inf", math.inf), ("w-nan", math.nan)):
        trace = fib_data.Trace(
            definition="tiny_scale",
            solution="bad_one",
            workload={**workload, "uuid": uuid},
            evaluation={
                "status": "INCORRECT_NUMERICAL",
                "environment": env,
                "timestamp": "2026-12-03T10:00:00",
                "log": "",
                "correctness": {"max_relative_error": err, "max_absolute_error": err},
            },
        )
        lines.append(trace.model_dump_json())
    assert '"Infinity"' in lines[0] and '"NaN"' in lines[1]  # the form under test
    path = tmp_path / "traces" / "alice" / "gdn" / "tiny_scale.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    table = load_results(path)
    errors = {r.uuid: r.max_abs_error for r in table.rows}
    assert errors["w-inf"] == math.inf and math.isnan(errors["w-nan"])
    assert {r.status for r in table.rows} == {"INCORRECT_NUMERICAL"}
    code, out, err = run_cli(capsys, "results", "show", str(path), "--json")
    assert code == 0, err
    assert {r["status"] for r in json.loads(out)["rows"]} == {"INCORRECT_NUMERICAL"}
