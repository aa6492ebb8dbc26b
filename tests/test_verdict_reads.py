"""The verdict of a run comes from the record in memory: ``run.json`` is not read again for it,
and ``fibtui compare RUN_ID`` parses the file once (its table and its run facts from one
document)."""

from __future__ import annotations

import builtins
import io
import json
import os
from pathlib import Path

import pytest

from fibtui.core import cachefile, stats
from fibtui.core.results import registry
from fibtui.core.runs import RunRecord, list_runs
from fibtui.core.workspace import open_workspace
from fibtui.services import decide

REPO = Path(__file__).resolve().parent.parent
SWEEP_RUN = "20261129-103545_demo_local"


class Opens:
    """Counts every open of one file: ``os.open`` (fibtui's input reader) and ``io.open`` /
    ``open`` (``Path.read_text``, ``open``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, target: Path) -> None:
        self.target = target.resolve()
        self.count = 0
        real_os_open, real_io_open = os.open, io.open

        def os_open(path, *args, **kwargs):
            self._saw(path)
            return real_os_open(path, *args, **kwargs)

        def io_open(file, *args, **kwargs):
            self._saw(file)
            return real_io_open(file, *args, **kwargs)

        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(io, "open", io_open)
        monkeypatch.setattr(builtins, "open", io_open)

    def _saw(self, path: object) -> None:
        if isinstance(path, (str, os.PathLike)) and Path(os.fspath(path)).resolve() == self.target:
            self.count += 1


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from fibtui.core.demo import create_demo_workspace

    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    assert (REPO / "optimize_ops" / "runs" / SWEEP_RUN).is_dir(), (
        "the archived demo round (optimize_ops/runs/) is committed with the repository and is missing"
    )
    root = create_demo_workspace(tmp_path / "ws", git_init=False)
    ws = open_workspace(root)
    path = ws.archive_root / "runs" / SWEEP_RUN / "run.json"
    return ws, path


def test_the_run_verdict_reads_no_run_json(demo, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, path = demo
    record = RunRecord.from_json(json.loads(path.read_text(encoding="utf-8")), path)
    # the runs listing keeps its own facts of each run.json (cached, under the file's key): that
    # is the listing's read, not the verdict's; the copied files count as settled at once
    monkeypatch.setattr(cachefile, "settled", lambda key: key is not None)
    list_runs(ws.archive_root)
    expected = decide.compare(ws, SWEEP_RUN)
    opens = Opens(monkeypatch, path)
    outcome = decide.run_verdict(ws, record)
    assert opens.count == 0
    assert outcome is not None and outcome.single is not None
    assert outcome.single.verdict == stats.PROMOTE
    # the same verdict as `fibtui compare RUN_ID`, which reads the file
    assert outcome.to_json() == expected.to_json()


def test_compare_a_run_id_parses_its_run_json_once(demo, monkeypatch) -> None:
    ws, path = demo
    parses = []
    real = registry.read_json_file

    def counting(p, **kwargs):
        if Path(p).resolve() == path.resolve():
            parses.append(p)
        return real(p, **kwargs)

    monkeypatch.setattr(registry, "read_json_file", counting)
    opens = Opens(monkeypatch, path)
    src = stats.load_source(SWEEP_RUN, ws.archive_root)
    assert len(parses) == 1
    # the whole file once, plus the first MiB its format was told by
    assert opens.count == 2
    assert src.run_id == SWEEP_RUN and src.selection == "all" and len(src.hashes) == 2
    assert len(src.table.rows) == 300


def test_a_listing_reads_a_run_json_once(demo, monkeypatch) -> None:
    """The listing's facts of a run (its timing kind, workloads, whether it is an A/A pair) come
    from one read of its run.json."""
    from fibtui.core import runs

    ws, path = demo
    opens = Opens(monkeypatch, path)
    facts = runs._record_facts(path)
    assert opens.count == 1
    assert facts.timing_kind == "cupti" and facts.workloads == 50 and not facts.same_code_pair
