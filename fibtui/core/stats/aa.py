"""A/A history: the same code measured against itself (same-code paired runs and
``benchmarks/aa.jsonl``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fibtui.core import locations, numbers
from fibtui.core.errors import InputError
from fibtui.core.measurement import CUPTI
from fibtui.core.stats.comparison import Comparison
from fibtui.core.stats.constants import CPU_INTERPRETER
from fibtui.core.stats.floor import AASession
from fibtui.core.stats.timing_keys import TimingKey
from fibtui.core.stats.verdict import paired_verdict


def aa_session_from(
    comparison: Comparison,
    source: str,
    kind: str,
    definition: str | None = None,
    gpu: str | None = None,
    timing_kind: str | None = None,
) -> AASession:
    """An A/A session from a comparison of the same code with itself."""
    sigma = None
    logs = [x for p in comparison.pairs if p.paired_by_repeat for x in p.pair_logs]
    if len(logs) >= 2:
        sigma = numbers.stdev(logs)
    elif len(comparison.pairs) >= 2:
        spread = numbers.stdev([p.log_ratio for p in comparison.pairs])
        reps = sum(p.pairs for p in comparison.pairs) / len(comparison.pairs)
        sigma = spread * math.sqrt(reps) if spread is not None else None
    repeats = max((p.pairs for p in comparison.pairs), default=0)
    return AASession(
        source=source,
        kind=kind,
        log_g=comparison.log_g or 0.0,
        sigma=sigma,
        workloads=comparison.workloads,
        repeats=repeats,
        definition=definition,
        gpu=gpu,
        verdict=comparison.verdict,
        timing_kind=timing_kind,
    )


class _BadField(Exception):
    """(field, message) of a bad value in an A/A line."""


def _count(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**9:
        raise _BadField(key, f"expected a whole number from 0 to 10^9, got {str(value)[:40]}")
    return value


def _text_value(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _BadField("timing_kind", f"expected text, got {str(value)[:40]}")
    return value


def _text(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _BadField(key, f"expected text, got {str(value)[:40]}")
    return value


def load_aa_file(path: Path) -> list[AASession]:
    """The sessions of ``optimize_ops/benchmarks/aa.jsonl`` (a broken line is a clear error)."""
    from fibtui.core.dataset import iter_jsonl

    if not path.is_file():
        return []
    out: list[AASession] = []
    for number, obj in iter_jsonl(path):
        try:
            log_g = float(obj["log_g"])
            sigma = obj.get("sigma")
            sigma = float(sigma) if sigma is not None else None
            gpu = obj.get("gpu")
            timing_kind = obj.get("timing_kind")
            if timing_kind is None and gpu:
                timing_kind = (
                    CUPTI  # sessions recorded before the timing kind was: GPU runs had a gpu
                )
            session = AASession(
                source=str(obj.get("source", "")),
                kind=str(obj.get("kind", "compare --aa")),
                log_g=log_g,
                sigma=sigma,
                workloads=_count(obj, "workloads", 0),
                repeats=_count(obj, "repeats", 1),
                definition=_text(obj, "definition"),
                gpu=_text(obj, "gpu"),
                verdict=_text(obj, "verdict"),
                timing_kind=_text_value(timing_kind),
            )
        except KeyError as exc:
            raise InputError(
                path, "required field is missing", line=number, field=str(exc.args[0])
            ) from None
        except _BadField as exc:
            raise InputError(path, exc.args[1], line=number, field=exc.args[0]) from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise InputError(path, f"bad value: {exc}", line=number) from None
        if not math.isfinite(log_g):
            raise InputError(path, "log_g must be a finite number", line=number, field="log_g")
        if sigma is not None and not (math.isfinite(sigma) and sigma >= 0):
            raise InputError(path, "sigma must be a finite number >= 0", line=number, field="sigma")
        out.append(session)
    return out


def aa_sessions(
    archive_root: Path,
    gpu: str | None = None,
    exclude_runs: Iterable[str] = (),
    *,
    definition: str | None = None,
    timing_kind: str | None = None,
) -> list[AASession]:
    """The A/A sessions of an archive (same-code paired runs plus ``benchmarks/aa.jsonl``) of one
    key: with ``timing_kind``, sessions of that (definition, device, timing kind) only; without
    it, sessions on another GPU than ``gpu`` are left out when both are known. CPU-interpreter
    sessions never calibrate anything."""
    import json

    from fibtui.core.runs import jobs_of, list_runs

    exclude = set(exclude_runs)
    sessions: list[AASession] = []
    for listing in list_runs(archive_root):
        if listing.run_id in exclude or listing.state != "complete":
            continue
        if listing.record is None or not listing.record.same_code_pair:
            continue  # no run.json, or its solutions are no A/A pair: not read
        record_path = listing.path / "run.json"
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        sols = record.get("solutions") or []
        base = [s for s in sols if s.get("role") == "baseline" and s.get("source_hash")]
        cands = [s for s in sols if s.get("role") == "candidate" and s.get("source_hash")]
        if len(base) != 1 or not cands:
            continue
        jobs = jobs_of(record)
        for c in cands:
            if c["source_hash"] != base[0]["source_hash"]:
                continue
            b_rows = [j for j in jobs if j.role == "baseline"]
            c_rows = [j for j in jobs if j.role == "candidate" and j.solution == c.get("name")]
            comp = paired_verdict(
                b_rows,
                c_rows,
                baseline_name=base[0].get("name", ""),
                candidate_name=c.get("name", ""),
            )
            if not comp.pairs:
                continue
            run_kind = record.get("timing_kind")
            run_gpu = (
                (record.get("environment") or {}).get("gpu")
                if run_kind != CPU_INTERPRETER
                else None
            )
            sessions.append(
                aa_session_from(
                    comp,
                    listing.run_id,
                    "paired-run",
                    record.get("definition"),
                    run_gpu,
                    run_kind if isinstance(run_kind, str) else None,
                )
            )
    sessions += load_aa_file(locations.aa_file(archive_root))
    sessions = [s for s in sessions if s.timing_kind != CPU_INTERPRETER]
    if timing_kind is not None:
        return [
            s
            for s in sessions
            if s.timing_kind == timing_kind
            and s.gpu == gpu
            and (definition is None or s.definition == definition)
        ]
    if gpu:
        sessions = [s for s in sessions if not s.gpu or s.gpu == gpu]
    return sessions


def aa_key_label(definition: str | None, key: TimingKey) -> str:
    return (
        f"{definition or 'definition not stated'}, {key.device or 'device not stated'}, {key.kind}"
    )


def record_aa_session(archive_root: Path, session: AASession) -> Path:
    """Append one A/A session to ``optimize_ops/benchmarks/aa.jsonl``."""
    import json

    from fibtui.core.fsio import append_line

    path = locations.aa_file(archive_root)
    append_line(path, json.dumps(session.to_json(), sort_keys=True))
    return path
