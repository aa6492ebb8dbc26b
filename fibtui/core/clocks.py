"""What a run says about its GPU's clocks (docs/measurement.md, "Clocks"): whether they were locked
as the official evaluator locks them, and which timed blocks ran throttled.

The worker records, per job, the GPU's clock setup (``timing.environment``: ``clocks_locked``,
the application clocks and their defaults, read with NVML) and, per timed block, the SM and memory
clocks, power, temperature and the slowdowns in force (``timing.block_clocks``); a throttled
block is measured again after a bounded cool-down (``timing.redone_blocks``, ``timing.cooled_s``).
The official evaluator locks the clocks (``nvidia-smi -ac 3996,1965``, on its B200s); fibtui
cannot (that needs root), so it says when they were not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

OFFICIAL_LOCK = "nvidia-smi -ac 3996,1965"


def _timing(job: Any) -> Mapping[str, Any]:
    timing = job.get("timing") if isinstance(job, Mapping) else getattr(job, "timing", None)
    return timing if isinstance(timing, Mapping) else {}


def clock_notes(jobs: Iterable[Any]) -> list[str]:
    """One line on the clock setup and one on throttled blocks, for a run's GPU jobs (run.json's
    ``jobs``, or the record's JobResults); nothing for CPU-interpreter jobs."""
    env: Mapping[str, Any] = {}
    blocks = redone = 0
    cooled = 0.0
    reasons: dict[str, int] = {}
    still = 0
    sm: list[int] = []
    for job in jobs:
        timing = _timing(job)
        if timing.get("kind") != "cupti":
            continue
        found = timing.get("environment")
        env = found if isinstance(found, Mapping) else env
        clocks = [c for c in timing.get("block_clocks") or [] if isinstance(c, Mapping)]
        blocks += len(clocks)
        for c in clocks:
            if isinstance(c.get("sm_mhz"), int):
                sm.append(c["sm_mhz"])
            why = [str(r) for r in c.get("throttle") or []]
            if why:
                still += 1
                for r in why:
                    reasons[r] = reasons.get(r, 0) + 1
        if isinstance(timing.get("redone_blocks"), int):
            redone += timing["redone_blocks"]
        if isinstance(timing.get("cooled_s"), (int, float)):
            cooled += float(timing["cooled_s"])
    out: list[str] = []
    if not env:
        return out
    locked = env.get("clocks_locked")
    seen = f"; the SM clock read {min(sm)}-{max(sm)} MHz over the blocks" if sm else ""
    if locked is False:
        out.append(
            "clocks not locked: application clocks at their defaults (SM "
            f"{env.get('app_sm_clock_mhz')} MHz, memory {env.get('app_mem_clock_mhz')} MHz){seen}; "
            f"the official evaluator locks them ({OFFICIAL_LOCK} on its B200s)"
        )
    elif locked is None:
        out.append(
            "clocks: not known whether locked (NVML could not be read: the gpu extra installs "
            f"nvidia-ml-py){seen}; the official evaluator locks them ({OFFICIAL_LOCK})"
        )
    if redone or still:
        names = ", ".join(f"{r} ({n})" for r, n in sorted(reasons.items())) or "clock sag"
        out.append(
            f"{redone} block(s) ran throttled or with a sagging SM clock and were measured again "
            f"after cool-downs of {cooled:.1f} s in all; {still} of {blocks} block(s) "
            f"still read throttled: {names}"
            if still
            else f"{redone} block(s) ran throttled or with a sagging SM clock and were measured "
            f"again after cool-downs of {cooled:.1f} s in all; none read throttled after it"
        )
    return out
