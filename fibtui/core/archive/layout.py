"""Names and places in the archive (``optimize_ops/``; the layout is in
:mod:`fibtui.core.archive`): the file names fibtui reads and writes, safe names, candidate ids
(``<version>_<band>_<change>``), latency-first best-solution names, and the folder of each
candidate and best solution."""

from __future__ import annotations

import math
import re
from pathlib import Path

from fibtui.core.errors import InputError
from fibtui.core.locations import RUNS_DIR as RUNS_DIR

ROUNDS_FILE = "docs/rounds.jsonl"
BEST_POINTER = "best.json"
#: ``<version>_<band>_<change>``: v2_smallb_splitv, v25a_long_gemm2_ns2
CANDIDATE_ID = re.compile(
    r"^v(?P<major>\d+)[a-z]?_(?P<band>[a-z0-9]+)_(?P<change>[a-z0-9]+(?:_[a-z0-9]+)*)$"
)
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: str, fallback: str = "item") -> str:
    name = _SAFE.sub("_", text).strip("._")[:100]
    return name or fallback


def rel_path(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def check_candidate_id(name: str) -> list[str]:
    """Warnings (never a refusal) when ``name`` does not read ``<version>_<band>_<change>``."""
    if CANDIDATE_ID.match(name):
        return []
    return [
        f"candidate id {name!r} does not name its hypothesis as <version>_<band>_<change> "
        "(e.g. v2_smallb_splitv: version v2, band smallb, change splitv)"
    ]


def candidate_parts(name: str) -> dict[str, str] | None:
    m = CANDIDATE_ID.match(name)
    if not m:
        return None
    return {"version": name.split("_", 1)[0], "band": m.group("band"), "change": m.group("change")}


def candidate_major(name: str) -> int | None:
    m = CANDIDATE_ID.match(name) or re.match(r"^v(?P<major>\d+)", name)
    return int(m.group("major")) if m else None


def latency_tag(latency_us: float) -> str:
    """8.022 us -> ``lat8p022us`` (three decimals, the point spelled ``p``)."""
    if (
        not isinstance(latency_us, (int, float))
        or isinstance(latency_us, bool)
        or not math.isfinite(latency_us)
        or latency_us < 0
    ):
        raise InputError(
            None,
            f"latency must be a finite non-negative number of microseconds, got {latency_us!r}",
            field="latency_us",
        )
    whole, _, frac = f"{float(latency_us) + 0.0:.3f}".partition(".")  # + 0.0 turns -0.0 into 0.0
    return f"lat{whole}p{frac}us"


def best_artifact_name(operator: str, model: str, latency_us: float, ext: str) -> str:
    """``<operator>_<model>_lat<xxpxxx>us.<ext>`` (ext without the leading dot, e.g. kernel.cu)."""
    return f"{safe_name(operator, 'operator')}_{safe_name(model, 'model')}_{latency_tag(latency_us)}.{ext.lstrip('.')}"


def candidate_folder(archive_root: Path, candidate_id: str, isolated: bool = False) -> Path:
    """``v<major>/<id>`` for a versioned id, ``kernels/<id>`` otherwise (or when ``isolated``)."""
    major = candidate_major(candidate_id)
    parent = archive_root / ("kernels" if isolated or major is None else f"v{major}")
    return parent / safe_name(candidate_id, "candidate")


def best_folder(archive_root: Path, language: str) -> Path:
    """``best_solution_<language>/``: the promoted kernels of one language and best.json."""
    return archive_root / f"best_solution_{safe_name(language, 'language')}"
