"""The ``[stats]`` settings and the noise floor tau (from ``min_gain`` and the A/A history)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core import numbers
from fibtui.core.errors import InputError
from fibtui.core.stats.constants import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    DEFAULT_CONFIDENCE,
    DEFAULT_GUARD_MARGIN,
    DEFAULT_MIN_GAIN,
    DEFAULT_TIE_BAND,
    PROMOTE,
)


@dataclass
class StatsSettings:
    min_gain: float = DEFAULT_MIN_GAIN
    confidence: float = DEFAULT_CONFIDENCE
    guard_margin: float = DEFAULT_GUARD_MARGIN
    tie_band: float = DEFAULT_TIE_BAND
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = BOOTSTRAP_SEED
    #: where min_gain came from: "default" or "fibtui.toml"
    min_gain_source: str = "default"

    @classmethod
    def from_workspace(cls, root: str | Path | None) -> StatsSettings:
        """``[stats]`` of the workspace's fibtui.toml (min_gain, confidence, guard_margin, tie_band)."""
        out = cls()
        if root is None:
            return out
        from fibtui.core.settings import get_setting, settings_path

        table = get_setting(root, "stats", {})
        if not isinstance(table, dict):
            raise InputError(settings_path(root), "expected a table", field="stats")
        limits = {
            "min_gain": (0.0, 0.5),
            "confidence": (0.5, 0.9999),
            "guard_margin": (0.0, 10.0),
            "tie_band": (0.0, 0.5),
        }
        for key, (lo, hi) in limits.items():
            if key not in table:
                continue
            value = table[key]
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not lo <= float(value) <= hi
            ):
                raise InputError(
                    settings_path(root),
                    f"expected a number within [{lo}, {hi}], got {value!r}",
                    field=f"stats.{key}",
                )
            setattr(out, key, float(value))
            if key == "min_gain":
                out.min_gain_source = "fibtui.toml"
        return out


@dataclass
class AASession:
    """One A/A session: the same code measured against itself."""

    source: str  # a run id, or "A vs B" of the compared files
    kind: str  # paired-run | compare --aa
    log_g: float
    sigma: float | None  # noise of one paired log ratio
    workloads: int
    repeats: int
    definition: str | None = None
    gpu: str | None = None
    verdict: str | None = None  # what the comparison said at the time (tracks false promotions)
    timing_kind: str | None = None  # cupti | flashinfer-bench | cpu-interpreter (None: not known)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NoiseFloor:
    tau: float
    source: str
    min_gain: float
    aa_sessions: int = 0
    aa_p99_abs_log_g: float | None = None
    aa_sigma: float | None = None
    aa_promotions: int = (
        0  # A/A sessions that were promoted when recorded: the real false-positive count
    )
    sessions: list[AASession] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["sessions"] = [s.to_json() for s in self.sessions]
        return out


def _pct(x: float) -> str:
    text = f"{x * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def noise_floor(
    settings: StatsSettings | None = None,
    sessions: Sequence[AASession] = (),
    key: str | None = None,
) -> NoiseFloor:
    """tau = max(min_gain, p99 |log G| over the A/A sessions), with where it came from; ``key``
    names the (definition, device, timing kind) the sessions were chosen by."""
    settings = settings or StatsSettings()
    sessions = list(sessions)
    if settings.min_gain_source == "default":
        gain_text = f"default {_pct(settings.min_gain)}"
    else:
        gain_text = f"fibtui.toml [stats] min_gain {_pct(settings.min_gain)}"
    if not sessions:
        return NoiseFloor(settings.min_gain, gain_text, settings.min_gain)
    p99 = numbers.percentile([abs(s.log_g) for s in sessions], 0.99) or 0.0
    sigmas = [
        (s.sigma, max(s.workloads * s.repeats - 1, 1))
        for s in sessions
        if s.sigma is not None and s.sigma > 0
    ]
    sigma = None
    if sigmas:
        dof = sum(w for _, w in sigmas)
        sigma = math.sqrt(sum(sg * sg * w for sg, w in sigmas) / dof)
    n = len(sessions)
    word = "session" if n == 1 else "sessions"
    promotions = sum(1 for s in sessions if s.verdict == PROMOTE)
    history = f"A/A history ({key})" if key else "A/A history"
    if p99 > settings.min_gain:
        source = f"{history}: {n} {word}, p99 |log G| {_pct(p99)}"
        tau = p99
    else:
        source = f"{gain_text}; {history}: {n} {word}, p99 |log G| {_pct(p99)}"
        tau = settings.min_gain
    return NoiseFloor(tau, source, settings.min_gain, n, p99, sigma, promotions, sessions)
