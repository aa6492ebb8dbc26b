"""How a latency was measured (:class:`TimingKey`), and which pairs of keys can give a speed verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fibtui.core.measurement import Timed
from fibtui.core.stats.constants import CPU_INTERPRETER


@dataclass(frozen=True)
class TimingKey:
    """How a latency was measured: the timing kind (``cupti``: fibtui on a GPU;
    ``cpu-interpreter``: Triton's interpreter, wall time; ``flashinfer-bench``: a file written by
    flashinfer-bench or the hand workflow around it) and the device (None when not stated).
    Verdicts, guards, dispatch advice and tau come only from GPU timings of one key."""

    kind: str
    device: str | None = None

    def label(self) -> str:
        return f"{self.kind} on {self.device}" if self.device else f"{self.kind}, device not stated"


def timing_key_of_rows(rows: Sequence[Timed]) -> TimingKey | None:
    """The key the rows themselves carry (fibtui journal rows: ``timing.kind`` and
    ``timing.environment.gpu``), or None when they carry none. Mixed rows give the first."""
    for r in rows:
        timing = r.timing
        if isinstance(timing, Mapping) and isinstance(timing.get("kind"), str):
            raw_env = timing.get("environment")
            env: Mapping[str, Any] = raw_env if isinstance(raw_env, Mapping) else {}
            device = env.get("gpu") if env.get("backend") != "interpreter" else None
            return TimingKey(str(timing["kind"]), str(device) if device else None)
    return None


def speed_blocker(base: TimingKey | None, cand: TimingKey | None) -> str | None:
    """Why these two arms' latencies cannot give a speed verdict, or None."""
    keys = [k for k in (base, cand) if k is not None]
    if any(k.kind == CPU_INTERPRETER for k in keys):
        return "CPU-interpreter timings give no speed verdict (wall times of Triton's interpreter say nothing about a GPU)"
    if base is not None and cand is not None:
        if base.kind != cand.kind:
            return f"the arms were timed differently ({base.label()} vs {cand.label()})"
        if base.device and cand.device and base.device != cand.device:
            return f"the arms were measured on different devices ({base.device} vs {cand.device})"
    return None
