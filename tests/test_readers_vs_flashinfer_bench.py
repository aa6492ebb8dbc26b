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
