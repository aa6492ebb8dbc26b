"""Clocks (docs/measurement.md, "Clocks"): every timed block records SM and memory clock, power and
temperature with the slowdowns in force; a throttled block is measured again after a bounded
cool-down; a run says when the clocks are not locked as the official evaluator's are. NVML is a
fake here (the worker's reads need a GPU); the H200 check is scripts/device/h200_official.sh."""

from __future__ import annotations

import pytest

from fibtui.core.clocks import clock_notes
from fibtui.worker import env as envmod


class FakeNvml:
    NVML_CLOCK_SM = 0
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, reasons: list[int] | None = None, app=(1980, 3201), default=(1980, 3201)):
        self.calls: list[str] = []
        self.reasons = list(reasons or [0])
        self.app, self.default = app, default

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802 - NVML's names
        self.calls.append("handle")
        return ("h", index)

    def nvmlDeviceGetClockInfo(self, h, kind):  # noqa: N802
        self.calls.append(f"clock{kind}")
        return 1980 if kind == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        self.calls.append("power")
        return 412_500  # milliwatts

    def nvmlDeviceGetTemperature(self, h, sensor):  # noqa: N802
        self.calls.append("temp")
        return 47

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):  # noqa: N802
        self.calls.append("reasons")
        return self.reasons.pop(0) if len(self.reasons) > 1 else self.reasons[0]

    def nvmlDeviceGetApplicationsClock(self, h, kind):  # noqa: N802
        return self.app[0] if kind == self.NVML_CLOCK_SM else self.app[1]

    def nvmlDeviceGetDefaultApplicationsClock(self, h, kind):  # noqa: N802
        return self.default[0] if kind == self.NVML_CLOCK_SM else self.default[1]

    def nvmlDeviceGetPowerManagementLimit(self, h):  # noqa: N802
        return 700_000


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    def install(**kwargs) -> FakeNvml:
        nv = FakeNvml(**kwargs)
        monkeypatch.setattr(envmod, "_nvml", nv)
        monkeypatch.setattr(envmod, "_handles", {})
        return nv

    return install


def test_a_block_records_clocks_power_temperature_and_slowdowns(fake) -> None:
    nv = fake(reasons=[0x4 | 0x20])
    got = envmod.block_clock(0)
    assert got == envmod.BlockClock(1980, 3201, 412.5, 47, ["power cap", "thermal slowdown"])
    assert got.throttled
    # one handle look-up for the process; per block five reads, and no max-clock query
    assert nv.calls == ["handle", "power", "clock0", "clock2", "temp", "reasons"]
    nv.calls.clear()
    envmod.block_clock(0)
    assert nv.calls == ["power", "clock0", "clock2", "temp", "reasons"]


def test_an_idle_or_app_clock_reason_is_not_throttling(fake) -> None:
    fake(reasons=[0x1 | 0x2])  # GPU idle, applications clocks setting
    assert envmod.block_clock(0).throttle == []


def test_no_nvml_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envmod, "_nvml", False)
    assert envmod.block_clock(0) is None
    assert envmod.clock_setup(0) == {"clocks_locked": None}


def test_throttled_and_sagging_blocks_are_measured_again() -> None:
    ok = envmod.BlockClock(1980)
    clocks = [
        ok,
        envmod.BlockClock(1980, throttle=["power cap"]),
        ok,
        envmod.BlockClock(1500),
        None,
    ]
    assert envmod.blocks_to_redo(clocks) == [1, 3]  # 1500 < 0.85 x 1980; None: nothing known
    assert envmod.blocks_to_redo([ok, ok]) == []


def test_the_cool_down_waits_while_throttled_and_is_bounded() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    hot = envmod.BlockClock(1500, throttle=["thermal slowdown"])
    reads = iter([hot, hot, envmod.BlockClock(1980)])
    waited = envmod.cool_down(lambda: next(reads), 5.0, 0.1, sleep, lambda: now[0])
    assert waited == pytest.approx(0.2) and slept == [0.1, 0.1]
    now[0], slept[:] = 0.0, []
    waited = envmod.cool_down(lambda: hot, 1.0, 0.3, sleep, lambda: now[0])
    assert waited == pytest.approx(1.0)  # never cooled: it gives up at the bound
    assert sum(slept) == pytest.approx(1.0)
    assert envmod.cool_down(None) == 0.0


def test_clocks_at_their_defaults_are_not_locked(fake) -> None:
    fake()
    setup = envmod.clock_setup(0)
    assert setup["clocks_locked"] is False and setup["app_sm_clock_mhz"] == 1980
    assert setup["power_limit_w"] == 700.0
    fake(app=(1965, 3996), default=(1980, 3201))
    assert envmod.clock_setup(0)["clocks_locked"] is True


def _job(env: dict, clocks: list, redone: int = 0, cooled: float = 0.0) -> dict:
    return {
        "timing": {
            "kind": "cupti",
            "environment": env,
            "block_clocks": clocks,
            "redone_blocks": redone,
            "cooled_s": cooled,
        }
    }


def test_a_run_says_its_clocks_were_not_locked_and_which_blocks_throttled() -> None:
    env = {
        "gpu": "NVIDIA H200",
        "clocks_locked": False,
        "app_sm_clock_mhz": 1980,
        "app_mem_clock_mhz": 3201,
    }
    ok = {"sm_mhz": 1980, "throttle": []}
    hot = {"sm_mhz": 1755, "throttle": ["power cap"]}
    notes = clock_notes([_job(env, [ok, ok]), _job(env, [ok, hot], redone=1, cooled=1.5)])
    assert len(notes) == 2
    assert notes[0].startswith("clocks not locked") and "1755-1980 MHz" in notes[0]
    assert "nvidia-smi -ac 3996,1965" in notes[0]
    assert "1 block(s) ran throttled" in notes[1] and "1.5 s" in notes[1]
    assert "1 of 4 block(s) still read throttled: power cap (1)" in notes[1]
    locked = {**env, "clocks_locked": True}
    assert clock_notes([_job(locked, [ok, ok])]) == []
    assert "not known whether locked" in clock_notes([_job({"gpu": "x"}, [ok])])[0]
    assert clock_notes([{"timing": {"kind": "cpu-interpreter"}}]) == []
