"""The run record (run.json) as a dataclass: read back and written again, it is the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fibtui.core.errors import InputError
from fibtui.core.runs import JobResult, RunRecord, build_record, write_record
from tests.tui_helpers import synthetic_gpu_run

REPO = Path(__file__).resolve().parents[1]


def _as_written(record: RunRecord) -> str:
    """What write_record puts in run.json (fibtui.core.fsio.atomic_write_json)."""
    return json.dumps(record.to_json(), indent=1, sort_keys=False) + "\n"


def _committed_records() -> list[Path]:
    return sorted(
        p
        for p in REPO.rglob("run.json")
        if ".git" not in p.parts and ".venv" not in p.parts and "tests" not in p.parts
    )


def test_every_committed_run_record_round_trips_byte_for_byte() -> None:
    paths = _committed_records()
    assert len(paths) >= 3, paths  # the bundled demo runs under optimize_ops/runs/
    for path in paths:
        text = path.read_text(encoding="utf-8")
        record = RunRecord.from_json(json.loads(text), path)
        assert _as_written(record) == text, path
        # they predate JobResult.correctness: the key stays absent, never an empty object
        assert all(j.correctness is None for j in record.jobs), path
        assert record.summary.total == len(record.jobs) and record.summary.complete


def test_a_fresh_record_reads_back_equal_and_writes_the_same_bytes(demo_ws: Path) -> None:
    folder = synthetic_gpu_run(demo_ws)
    text = (folder / "run.json").read_text(encoding="utf-8")
    record = RunRecord.from_json(json.loads(text))
    assert record == build_record(folder)
    assert _as_written(record) == text
    assert all(j.correctness == {} for j in record.jobs)  # never judged: an empty object
    assert record.summary.per_solution["candidate:v2_smallb_splitv"].passed == 50
    assert write_record(folder) == record
    assert (folder / "run.json").read_text(encoding="utf-8") == text


def test_a_job_keeps_its_correctness_key_as_it_was() -> None:
    base = {
        "uuid": "u",
        "axes": {"n": 1},
        "solution": "s",
        "role": "candidate",
        "repeat": 0,
        "status": "PASSED",
    }
    absent = JobResult.from_json(base).to_json()
    assert "correctness" not in absent
    judged = {**base, "correctness": {"evaluator": "default"}}
    assert JobResult.from_json(judged).to_json()["correctness"] == {"evaluator": "default"}
    assert JobResult.from_json({**base, "correctness": {}}).to_json()["correctness"] == {}
    assert JobResult(**base).to_json()["correctness"] == {}  # a new result always carries it


@pytest.mark.parametrize("drop", ["summary", "jobs", "run_id"])
def test_a_record_missing_a_field_is_one_input_error(drop: str) -> None:
    path = _committed_records()[0]
    obj = json.loads(path.read_text(encoding="utf-8"))
    del obj[drop]
    with pytest.raises(InputError) as exc:
        RunRecord.from_json(obj, path)
    assert str(path) in exc.value.one_line() and "not a fibtui run record" in exc.value.one_line()


def test_the_result_types_share_one_measurement_and_keep_their_json_keys() -> None:
    from fibtui.core.measurement import MEASUREMENT_FIELDS, Measurement
    from fibtui.core.results import ResultRow

    measured = {
        "latency_ms": 0.5,
        "reference_latency_ms": 1.0,
        "speedup": 2.0,
        "max_abs_error": 1e-3,
        "max_rel_error": 2e-3,
        "error": None,
    }
    assert list(MEASUREMENT_FIELDS) == list(measured)
    row = ResultRow("d", "s", "u", {"n": 1}, "PASSED", source="f:1", **measured)
    job = JobResult("u", {"n": 1}, "s", "candidate", 0, "PASSED", **measured)
    assert isinstance(row, Measurement) and isinstance(job, Measurement)
    assert row.measured() == job.measured() == measured
    # the keys, in the order the files written before the shared type hold them
    assert list(row.to_json()) == [
        *("definition", "solution", "uuid", "axes", "status"),
        *measured,
        *("source", "role", "repeat", "block_medians_ms"),
    ]
    assert list(job.to_json()) == [
        *("uuid", "axes", "solution", "role", "repeat", "status"),
        *measured,
        *("timing", "attempt", "correctness", "started", "finished", "wall_s"),
    ]
