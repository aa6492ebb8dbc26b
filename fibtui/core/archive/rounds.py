"""Round records: ``docs/rounds.jsonl``, one line per decision (a later line for a round replaces
the earlier one). A record freezes what its decision used (the noise floor, the statistics
settings), so its summary is regenerated from the records alone."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core.archive.layout import ROUNDS_FILE
from fibtui.core.dataset import iter_jsonl
from fibtui.core.errors import InputError, UsageError
from fibtui.core.fsio import append_line

DECISIONS = ("promoted", "archived", "rejected", "undecided")


@dataclass
class RoundRecord:
    round: str  # <date>_<topic>
    date: str
    topic: str
    definition: str
    baseline: dict[str, Any]  # name, source_hash, language, entry_point
    candidate: dict[str, Any]
    runs: list[dict[str, str]]  # run_id, kind (gate | sweep | selection)
    decision: str  # promoted | archived | rejected | undecided
    reason: str = ""
    summary: str = ""  # docs/round_<date>_<topic>.md (relative to the archive root)
    artifacts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    noise_floor: dict[str, Any] = field(default_factory=dict)  # frozen: tau, source, min_gain, aa_*
    settings: dict[str, Any] = field(default_factory=dict)  # frozen stats settings
    verdict: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": "round", **asdict(self)}

    @classmethod
    def from_json(
        cls, obj: dict[str, Any], path: Path | None = None, line: int | None = None
    ) -> RoundRecord:
        known = set(cls.__dataclass_fields__)
        try:
            rec = cls(**{k: v for k, v in obj.items() if k in known})
        except TypeError as exc:
            raise InputError(path, f"round record is malformed: {exc}", line=line) from None
        for key in ("round", "date", "definition", "decision"):
            if not isinstance(getattr(rec, key), str) or not getattr(rec, key):
                raise InputError(path, "expected a non-empty string", line=line, field=key)
        if rec.decision not in DECISIONS:
            raise InputError(
                path,
                f"expected one of {', '.join(DECISIONS)}, got {rec.decision!r}",
                line=line,
                field="decision",
            )
        if not isinstance(rec.runs, list) or not all(
            isinstance(r, dict) and isinstance(r.get("run_id"), str) for r in rec.runs
        ):
            raise InputError(path, "expected a list of {run_id, kind}", line=line, field="runs")
        return rec


def load_rounds(archive_root: Path) -> list[RoundRecord]:
    """Every round, in the order first recorded; a later line for a round replaces the earlier."""
    path = archive_root / ROUNDS_FILE
    if not path.is_file():
        return []
    out: dict[str, RoundRecord] = {}
    for number, obj in iter_jsonl(path):
        rec = RoundRecord.from_json(obj, path, number)
        out[rec.round] = rec
    return list(out.values())


def append_round(archive_root: Path, record: RoundRecord) -> Path:
    path = archive_root / ROUNDS_FILE
    append_line(path, json.dumps(record.to_json(), sort_keys=True))
    return path


def find_round(archive_root: Path, name: str | None = None) -> RoundRecord:
    rounds = load_rounds(archive_root)
    if not rounds:
        raise UsageError(
            f"no round recorded in {archive_root / ROUNDS_FILE}: decide one with fibtui promote / "
            "reject / archive, or summarize runs with fibtui round summary --runs RUN_ID ..."
        )
    if name is None:
        return rounds[-1]
    for r in rounds:
        if r.round == name or r.summary.endswith(f"round_{name}.md") or r.summary == name:
            return r
    raise UsageError(f"no round {name!r} (known: {', '.join(r.round for r in rounds[-8:])})")


def decided_round(archive_root: Path, run_ids: list[str]) -> RoundRecord | None:
    """The recorded round over exactly these runs, if there is one."""
    want = sorted(run_ids)
    found = [r for r in load_rounds(archive_root) if sorted(x["run_id"] for x in r.runs) == want]
    return found[-1] if found else None
