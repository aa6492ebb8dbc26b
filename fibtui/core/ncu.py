"""Nsight Compute reports: read them, boil each kernel down to one row, classify it, diff two.

Readers (none needs ``ncu``; all return an :class:`NcuReport` of :class:`Launch` records):

- the details CSV page (``ncu --import X --csv --page details``): one row per metric or rule;
- the raw CSV page (``--page raw --csv``): one row per launch, one column per metric, a second
  header row holding the units;
- the details text page (``--page details`` without ``--csv``): kernel blocks headed
  ``<kernel> (gx, gy, gz)x(bx, by, bz), Context N, Stream N, Device N, CC x.y``, ``Section:``
  tables of ``Metric Name / Metric Unit / Metric Value`` between dash separator lines, and
  ``OPT`` / ``INF`` / ``WRN`` rule paragraphs;
- the hand workflow's result JSON, whose ``ncu_profile.rows[].output`` holds that text page
  (each row also names ``workload_uuid`` and ``axes``: one band per row);
- a binary ``.ncu-rep`` when ``ncu`` is on the PATH (it is exported to both CSV pages first).

Units are normalized (:func:`normalize`): times to microseconds (``us``), sizes to bytes
(``byte``; ncu's ``Kbyte``/``Mbyte`` and ``KB``/``MB`` are decimal, ``KiB``/``MiB`` binary),
rates to per second, frequencies to ``GHz``, percentages to ``%``; thousands separators
(``36,029``) are removed. A unit fibtui does not scale (``block``, ``register/thread``,
``%/Kbyte``, anything unknown) is kept as written, and a value that is not a number is kept as
text; nothing here raises on an odd cell.

Compact table (:func:`summarize`): one :class:`KernelSummary` per kernel name (and band), the
slowest instance's metrics plus the number of instances (see :data:`FIELDS`).

Classification (:func:`classify`), thresholds documented here and used nowhere else:

=============================  =======  =====================================================
threshold                      value    meaning
=============================  =======  =====================================================
BUSY_PCT                       60 %     a unit at or above 60 % of its peak (Speed Of Light)
                                        is busy. Memory-bound: max(memory, DRAM) throughput
                                        >= 60 % and >= compute throughput; compute-bound:
                                        compute >= 60 % and above memory; both under 60 %:
                                        latency-bound. This is the line Nsight Compute's own
                                        SOL rule draws ("below 60 % of peak typically indicates
                                        latency issues"), so 49 % memory throughput is not
                                        memory-bound: half the bandwidth sits idle while warps
                                        wait.
LAUNCH_GAP_SHARE               0.5      launch-bound only with a host measurement
                                        (:class:`HostGaps`): idle time between launches is at
                                        least half of the call's span (gaps + kernel time).
                                        The device class is still reported
                                        (``device_bottleneck``).
GRID_TOO_SMALL_WAVES           1.0      waves per SM under 1: "grid too small" (idle SMs).
TAIL_FILL                      0.5      1 <= waves < TAIL_MAX_WAVES (4) and the last, partial
                                        wave is under half full: tail effect.
IMBALANCE_RATIO                0.8      achieved occupancy under 80 % of theoretical:
                                        scheduling / load imbalance.
FULL_OCCUPANCY_PCT             99.5 %   theoretical occupancy under this: occupancy is
                                        limited, by the smallest block limit (the limiter:
                                        registers, shared_memory, warps, blocks, or barriers).
L2_HIT_LOW_PCT                 60 %     memory-bound with an L2 hit rate under this: suggest L2
                                        persistence for read-mostly data.
CROSS_BLOCK_L2_HIT_PCT         80 %     memory-bound, L2 hit rate at least this and DRAM
                                        throughput well under memory throughput (by
                                        CROSS_BLOCK_DRAM_GAP_PCT, 15 points): blocks re-read
                                        shared data through L2; suggest clusters + distributed
                                        shared memory.
spilling                       > 0      any local-memory spilling request or register-spilling
                                        instruction.
=============================  =======  =====================================================

Every finding carries the numbers it was decided from and the tactic families to try (the
diagnosis table of docs/diagnosis.md, "Tactic families"); a tactic is only listed together with the measured limiter it
would relieve (``relieves``).

Diff (:func:`diff_summaries`, :func:`diff_reports`, :func:`diff_bands`): per kernel and band,
each compact metric before / after / delta / percent, with classification changes flagged.
:func:`shape_matrix` gives band -> dominant kernel -> bottleneck -> limiter as plain dicts.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core.errors import FibError, InputError, UsageError
from fibtui.core.fsio import check_input_file, read_input

# --------------------------------------------------------------------------------------------
# Errors of the ncu executable
# --------------------------------------------------------------------------------------------


class NcuNotFound(UsageError):
    """``ncu`` is needed (profiling, or reading a binary ``.ncu-rep``) and is not on the PATH."""


class NcuFailed(FibError):
    """``ncu`` ran and failed (a non-zero exit, or no report written)."""


class NcuTimeout(FibError):
    """``ncu`` did not finish within its timeout (it was stopped)."""


def find_ncu(ncu: str | None = None) -> str:
    """The ncu executable: ``ncu`` given as a path or name, else ``ncu`` on the PATH."""
    found = shutil.which(ncu or "ncu")
    if found is None:
        raise NcuNotFound(
            f"Nsight Compute's {ncu or 'ncu'!r} is not on the PATH; install Nsight Compute (or add "
            "its folder to PATH), or export the report elsewhere with "
            "'ncu --import X.ncu-rep --csv --page details > X_details.csv'"
        )
    return found


def export_page(rep: str | Path, page: str, *, csv_format: bool = True, ncu: str | None = None,
                timeout_s: float = 300.0) -> str:
    """``ncu --import REP [--csv] --page PAGE`` and its standard output (list args, no shell)."""
    exe = find_ncu(ncu)
    cmd = [exe, "--import", str(rep)]
    if csv_format:
        cmd.append("--csv")
    cmd += ["--page", page]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace",  # noqa: S603
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise NcuTimeout(f"'ncu --import {rep} --page {page}' did not finish within {timeout_s:g} s") from None
    except OSError as exc:
        raise NcuFailed(f"cannot run {exe}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise NcuFailed(f"'ncu --import {rep} --page {page}' exited with {proc.returncode}: {tail or 'no output'}")
    return proc.stdout


# --------------------------------------------------------------------------------------------
# Units
# --------------------------------------------------------------------------------------------

# Exact spellings (case matters for the short forms: "ms" is not "Ms").
_TIME_US: dict[str, float] = {
    "ns": 1e-3, "us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6,
}
# Word forms, matched case-insensitively.
_TIME_US_WORDS: dict[str, float] = {
    "nsecond": 1e-3, "nsec": 1e-3, "nanosecond": 1e-3, "nanoseconds": 1e-3,
    "usecond": 1.0, "usec": 1.0, "microsecond": 1.0, "microseconds": 1.0,
    "msecond": 1e3, "msec": 1e3, "millisecond": 1e3, "milliseconds": 1e3,
    "second": 1e6, "sec": 1e6, "seconds": 1e6,
}
_BYTES: dict[str, float] = {
    "B": 1.0, "KB": 1e3, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "KiB": 1024.0, "MiB": 1024.0**2, "GiB": 1024.0**3, "TiB": 1024.0**4,
}
_BYTES_WORDS: dict[str, float] = {
    "byte": 1.0, "bytes": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12, "pbyte": 1e15,
    "kibyte": 1024.0, "mibyte": 1024.0**2, "gibyte": 1024.0**3, "tibyte": 1024.0**4,
}
_FREQ_GHZ: dict[str, float] = {  # lower-cased keys
    "hz": 1e-9, "khz": 1e-6, "mhz": 1e-3, "ghz": 1.0,
    "cycle/nsecond": 1.0, "cycle/ns": 1.0, "cycle/usecond": 1e-3, "cycle/us": 1e-3,
    "cycle/msecond": 1e-6, "cycle/ms": 1e-6, "cycle/second": 1e-9, "cycle/s": 1e-9,
}
_PERCENT = {"%", "pct", "percent"}
_MISSING = {"", "n/a", "na", "no data", "none", "-", "--"}

_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,4})?", re.ASCII)
_GROUPED_NUMBER = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d{1,4})?", re.ASCII)


def parse_number(text: str) -> float | None:
    """``"36,029"`` -> 36029.0, ``"1.5e3"`` -> 1500.0; anything else (or non-finite) -> None."""
    t = text.strip().replace("\u00a0", "").replace("\u202f", "")
    if _GROUPED_NUMBER.fullmatch(t):
        t = t.replace(",", "")
    elif not _PLAIN_NUMBER.fullmatch(t):
        return None
    try:
        value = float(t)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _time_factor_us(unit: str) -> float | None:
    if unit in _TIME_US:
        return _TIME_US[unit]
    return _TIME_US_WORDS.get(unit.lower())


def _byte_factor(unit: str) -> float | None:
    if unit in _BYTES:
        return _BYTES[unit]
    return _BYTES_WORDS.get(unit.lower())


def normalize_unit(unit: str) -> tuple[str, float]:
    """(canonical unit, factor to multiply a value by); an unknown unit is (itself, 1.0)."""
    u = unit.strip()
    if not u:
        return "", 1.0
    if u.lower() in _PERCENT:
        return "%", 1.0
    if (f := _time_factor_us(u)) is not None:
        return "us", f
    if (f := _byte_factor(u)) is not None:
        return "byte", f
    if (f := _FREQ_GHZ.get(u.lower())) is not None:
        return "GHz", f
    if u.count("/") == 1:
        num, den = (part.strip() for part in u.split("/"))
        if num and den:
            num_f = _byte_factor(num)
            num_c = "byte" if num_f is not None else num
            den_us = _time_factor_us(den)
            if den_us is not None:
                return f"{num_c}/s", (num_f or 1.0) / (den_us * 1e-6)
            if num_f is not None:
                return f"byte/{den}", num_f
    return u, 1.0


def normalize(value: str | None, unit: str | None) -> tuple[float | str | None, str]:
    """A cell and its unit -> (number in the canonical unit, or the text as given, or None; unit).

    Never raises: an unknown unit is kept as written, a non-number is kept as text, an empty or
    ``n/a`` cell is None.
    """
    unit_text = "" if unit is None else str(unit).strip()
    return _normalize_with("" if value is None else str(value), unit_text, *normalize_unit(unit_text))


def _normalize_with(value: str, unit_text: str, canon: str, factor: float) -> tuple[float | str | None, str]:
    raw = value.strip()
    if raw.lower() in _MISSING:
        return None, canon
    number = parse_number(raw)
    if number is None and raw.endswith("%") and unit_text in ("", "%"):
        number, canon, factor = parse_number(raw[:-1]), "%", 1.0
    if number is None:
        return raw, canon
    scaled = number * factor
    if not math.isfinite(scaled):
        return raw, unit_text
    return scaled, canon


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass
class Metric:
    section: str
    name: str
    value: float | str | None
    unit: str  # canonical (see normalize)
    raw_value: str = ""
    raw_unit: str = ""


@dataclass
class Rule:
    section: str
    name: str
    type: str  # OPT | INF | WRN | ERR
    text: str
    speedup_type: str | None = None  # local | global
    speedup_pct: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"section": self.section, "name": self.name, "type": self.type, "text": self.text,
                "speedup_type": self.speedup_type, "speedup_pct": self.speedup_pct}


@dataclass
class Launch:
    """One profiled kernel launch and every metric and rule that came with it."""

    kernel: str
    id: int | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    context: int | None = None
    stream: int | None = None
    device: int | None = None
    cc: str | None = None
    process_id: int | None = None
    process_name: str | None = None
    workload: str | None = None
    axes: dict[str, Any] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    def find(self, name: str, unit: str | None = None) -> Metric | None:
        """The first metric called ``name`` (case-insensitive) with a number in ``unit``
        (a canonical unit, or its prefix such as ``byte`` for ``byte/block``)."""
        for m in self._index().get(name.lower(), ()):
            if not isinstance(m.value, float):
                continue
            if unit is None or m.unit == unit or m.unit.startswith(unit + "/"):
                return m
        return None

    def _index(self) -> dict[str, list[Metric]]:
        cached = self.__dict__.get("_by_name")
        if cached is None or cached[0] != len(self.metrics):
            index: dict[str, list[Metric]] = {}
            for m in self.metrics:
                index.setdefault(m.name.lower(), []).append(m)
            cached = (len(self.metrics), index)
            self.__dict__["_by_name"] = cached
        return cached[1]


@dataclass
class NcuReport:
    path: str | None
    source_format: str  # details-csv | raw-csv | details-text | hand-json | ncu-rep
    launches: list[Launch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# The compact fields: where each is found (details/text display names, then raw metric names)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSpec:
    names: tuple[str, ...]  # details / text page display names
    raw: tuple[str, ...]  # raw page metric names
    unit: str | None  # required canonical unit (prefix match for byte/...), None: any number


FIELDS: dict[str, FieldSpec] = {
    "duration_us": FieldSpec(("Duration",), ("gpu__time_duration.sum", "gpu__time_duration.avg"), "us"),
    "compute_throughput_pct": FieldSpec(("Compute (SM) Throughput", "Compute (SM) [%]", "SM [%]"),
                                        ("sm__throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
    "memory_throughput_pct": FieldSpec(("Memory Throughput", "Memory [%]"),
                                       ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
    "dram_throughput_pct": FieldSpec(("DRAM Throughput",),
                                     ("dram__throughput.avg.pct_of_peak_sustained_elapsed",
                                      "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                                      "dram__cycles_active.avg.pct_of_peak_sustained_elapsed"), "%"),
    "l2_hit_rate_pct": FieldSpec(("L2 Hit Rate",), ("lts__t_sector_hit_rate.pct",), "%"),
    "registers_per_thread": FieldSpec(("Registers Per Thread",), ("launch__registers_per_thread",), None),
    "dynamic_shared_memory_bytes": FieldSpec(("Dynamic Shared Memory Per Block",),
                                             ("launch__shared_mem_per_block_dynamic",), "byte"),
    "static_shared_memory_bytes": FieldSpec(("Static Shared Memory Per Block",),
                                            ("launch__shared_mem_per_block_static",), "byte"),
    "theoretical_occupancy_pct": FieldSpec(("Theoretical Occupancy",), ("sm__maximum_warps_per_active_cycle_pct",), "%"),
    "achieved_occupancy_pct": FieldSpec(("Achieved Occupancy",),
                                        ("sm__warps_active.avg.pct_of_peak_sustained_active",), "%"),
    "waves_per_sm": FieldSpec(("Waves Per SM",), ("launch__waves_per_multiprocessor",), None),
    "grid_blocks": FieldSpec(("Grid Size",), ("launch__grid_size",), None),
    "block_threads": FieldSpec(("Block Size",), ("launch__block_size",), None),
    "block_limit_registers": FieldSpec(("Block Limit Registers",), ("launch__occupancy_limit_registers",), None),
    "block_limit_shared_memory": FieldSpec(("Block Limit Shared Mem", "Block Limit Shared Memory"),
                                           ("launch__occupancy_limit_shared_mem",), None),
    "block_limit_warps": FieldSpec(("Block Limit Warps",), ("launch__occupancy_limit_warps",), None),
    "block_limit_blocks": FieldSpec(("Block Limit SM",), ("launch__occupancy_limit_blocks",), None),
    "block_limit_barriers": FieldSpec(("Block Limit Barriers",), ("launch__occupancy_limit_barriers",), None),
    "l2_persisting_size_bytes": FieldSpec(("L2 Persisting Size",), ("launch__persisting_l2_cache_size",), "byte"),
    "local_spilling_requests": FieldSpec(("Local Memory Spilling Requests",), ("derived__local_spilling_requests",), None),
    "local_spilling_overhead_pct": FieldSpec(("Local Memory Spilling Request Overhead",),
                                             ("derived__local_spilling_requests_pct",), "%"),
    "register_spilling_instructions": FieldSpec((), ("sass__inst_executed_register_spilling",), None),
    "sm_count": FieldSpec(("# SMs",), ("launch__sm_count",), None),
    "sm_frequency_ghz": FieldSpec(("SM Frequency",), ("gpc__cycles_elapsed.avg.per_second",), "GHz"),
}

# The limiter names, in the order used to break a tie.
LIMITS: dict[str, str] = {
    "registers": "block_limit_registers",
    "shared_memory": "block_limit_shared_memory",
    "warps": "block_limit_warps",
    "blocks": "block_limit_blocks",
    "barriers": "block_limit_barriers",
}


def launch_fields(launch: Launch) -> dict[str, float | None]:
    """The compact fields of one launch (None where the report does not have them)."""
    out: dict[str, float | None] = {}
    for key, spec in FIELDS.items():
        value: float | None = None
        for name in (*spec.names, *spec.raw):
            m = launch.find(name, spec.unit)
            if m is not None:
                value = m.value  # type: ignore[assignment]
                break
        out[key] = value
    if out["grid_blocks"] is None and launch.grid:
        out["grid_blocks"] = float(launch.grid[0] * launch.grid[1] * launch.grid[2])
    if out["block_threads"] is None and launch.block:
        out["block_threads"] = float(launch.block[0] * launch.block[1] * launch.block[2])
    return out


# --------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------

_DIMS = re.compile(r"\(\s*(\d{1,12})\s*,\s*(\d{1,12})\s*,\s*(\d{1,12})\s*\)", re.ASCII)
_ASCII_INT = re.compile(r"\d{1,18}", re.ASCII)


def _dims(text: str) -> tuple[int, int, int] | None:
    m = _DIMS.fullmatch(text.strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    t = text.strip().replace(",", "")
    return int(t) if _ASCII_INT.fullmatch(t) else None


_SPEEDUP = re.compile(r"^Est\.\s+(?:(Local|Global)\s+)?Speedup:\s*([-+\d.,eE]+)\s*%\s*", re.IGNORECASE)


def _csv_records(lines: list[str], start: int) -> Iterator[tuple[int, list[str]]]:
    """CSV records from ``lines[start:]`` with the 1-based number of each record's last line;
    ncu's own ``==PROF==`` / ``==WARNING==`` lines are skipped."""
    pos = [start]

    def feed() -> Iterator[str]:
        while pos[0] < len(lines):
            line = lines[pos[0]]
            pos[0] += 1
            if line.startswith("=="):
                continue
            yield line

    reader = csv.reader(feed())
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(None, f"not valid CSV: {exc}", line=pos[0]) from None
        yield pos[0], row


def _find_csv_header(lines: list[str]) -> int | None:
    for i, line in enumerate(lines[:200]):
        s = line.lstrip("\ufeff").lstrip()
        if s.startswith('"ID"') or s.startswith("ID,"):
            return i
    return None


def _header(path: str | None, lines: list[str], start: int) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    records = _csv_records(lines, start)
    try:
        _, header = next(records)
    except StopIteration:
        raise InputError(path, "no CSV header") from None
    except InputError as exc:
        raise InputError(path, exc.message, line=exc.line) from None
    return [h.lstrip("\ufeff").strip() for h in header], records


def _with_path(path: str | None, records: Iterator[tuple[int, list[str]]]) -> Iterator[tuple[int, list[str]]]:
    try:
        yield from records
    except InputError as exc:
        if exc.path is None:
            raise InputError(path, exc.message, line=exc.line, field=exc.field) from None
        raise


def _check_width(path: str | None, line: int, row: list[str], header: list[str]) -> None:
    if len(row) > len(header) and any(c.strip() for c in row[len(header):]):
        raise InputError(path, f"row has {len(row)} fields, the header has {len(header)}", line=line)


def parse_details_csv(text: str, path: str | Path | None = None) -> NcuReport:
    """The details page as CSV: one row per metric (or per rule) of each launch."""
    where = None if path is None else str(path)
    lines = text.splitlines(keepends=True)
    start = _find_csv_header(lines)
    if start is None:
        raise InputError(where, "no CSV header starting with \"ID\" (is this an Nsight Compute CSV export?)")
    header, records = _header(where, lines, start)
    col = {name: i for i, name in enumerate(header)}
    for required in ("Kernel Name", "Metric Name", "Metric Value"):
        if required not in col:
            raise InputError(where, f"no {required!r} column: not a details page CSV", line=start + 1, field=required)
    value_col = col["Metric Value"]
    report = NcuReport(where, "details-csv")
    by_key: dict[str, Launch] = {}
    for line, row in _with_path(where, records):
        if not any(c.strip() for c in row) or [c.strip() for c in row] == header:
            continue
        _check_width(where, line, row, header)
        if len(row) <= value_col:
            raise InputError(where, f"row ends after {len(row)} fields, before the 'Metric Value' column "
                             f"(the header has {len(header)})", line=line, field="Metric Value")

        def get(name: str, row: list[str] = row) -> str:
            i = col.get(name)
            return row[i].strip() if i is not None and i < len(row) else ""

        kernel = get("Kernel Name")
        if not kernel:
            raise InputError(where, "empty kernel name", line=line, field="Kernel Name")
        key = get("ID") or f"{kernel}|{get('Grid Size')}|{get('Block Size')}|{get('Context')}|{get('Stream')}"
        launch = by_key.get(key)
        if launch is None:
            launch = Launch(kernel=kernel, id=_int(get("ID")), grid=_dims(get("Grid Size")),
                            block=_dims(get("Block Size")), context=_int(get("Context")),
                            stream=_int(get("Stream")), device=_int(get("Device")), cc=get("CC") or None,
                            process_id=_int(get("Process ID")), process_name=get("Process Name") or None)
            by_key[key] = launch
            report.launches.append(launch)
        section = get("Section Name")
        name = get("Metric Name")
        if name:
            raw_value, raw_unit = get("Metric Value"), get("Metric Unit")
            value, unit = normalize(raw_value, raw_unit)
            launch.metrics.append(Metric(section, name, value, unit, raw_value, raw_unit))
        rule_name, rule_text = get("Rule Name"), get("Rule Description")
        if rule_name or rule_text:
            speedup = parse_number(get("Estimated Speedup"))
            launch.rules.append(Rule(section, rule_name, get("Rule Type") or "INF", rule_text,
                                     get("Estimated Speedup Type") or None, speedup))
    if not report.launches:
        raise InputError(where, "the details CSV holds no kernel rows")
    return report


_IDENTITY_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                     "Block Size", "Grid Size", "Device", "CC")


def parse_raw_csv(text: str, path: str | Path | None = None) -> NcuReport:
    """The raw page as CSV: one row per launch, one column per metric, units in a second header row."""
    where = None if path is None else str(path)
    lines = text.splitlines(keepends=True)
    start = _find_csv_header(lines)
    if start is None:
        raise InputError(where, "no CSV header starting with \"ID\" (is this an Nsight Compute CSV export?)")
    header, records = _header(where, lines, start)
    col = {name: i for i, name in enumerate(header)}
    if "Kernel Name" not in col:
        raise InputError(where, "no 'Kernel Name' column: not a raw page CSV", line=start + 1, field="Kernel Name")
    units: list[str] = [""] * len(header)
    report = NcuReport(where, "raw-csv")
    first = True
    metric_cols = [i for i, name in enumerate(header) if name and name not in _IDENTITY_COLUMNS]
    unit_info = [normalize_unit(u) for u in units]
    for line, row in _with_path(where, records):
        if not any(c.strip() for c in row) or [c.strip() for c in row] == header:
            continue
        _check_width(where, line, row, header)

        def get(name: str, row: list[str] = row) -> str:
            i = col.get(name)
            return row[i].strip() if i is not None and i < len(row) else ""

        if first:
            first = False
            if not get("Kernel Name") and _int(get("ID")) is None:
                units = [c.strip() for c in row] + [""] * max(0, len(header) - len(row))
                unit_info = [normalize_unit(u) for u in units]
                continue
        kernel = get("Kernel Name")
        if not kernel:
            raise InputError(where, "empty kernel name", line=line, field="Kernel Name")
        launch = Launch(kernel=kernel, id=_int(get("ID")), grid=_dims(get("Grid Size")), block=_dims(get("Block Size")),
                        context=_int(get("Context")), stream=_int(get("Stream")), device=_int(get("Device")),
                        cc=get("CC") or None, process_id=_int(get("Process ID")),
                        process_name=get("Process Name") or None)
        for i in metric_cols:
            raw_value = row[i].strip() if i < len(row) else ""
            value, unit = _normalize_with(raw_value, units[i], *unit_info[i])
            launch.metrics.append(Metric("raw", header[i], value, unit, raw_value, units[i]))
        report.launches.append(launch)
    if not report.launches:
        raise InputError(where, "the raw CSV holds no launch rows")
    return report


_KERNEL_HEADER = re.compile(
    r"^\s*(?P<name>\S.*?)\s*\((?P<g>\s*\d+\s*,\s*\d+\s*,\s*\d+\s*)\)x\((?P<b>\s*\d+\s*,\s*\d+\s*,\s*\d+\s*)\)"
    r",\s*Context\s+(?P<ctx>\d+),\s*Stream\s+(?P<stream>\d+)"
    r"(?:,\s*Device\s+(?P<dev>\d+))?(?:,\s*CC\s+(?P<cc>[\d.]+))?",
    re.ASCII,
)
_PROCESS = re.compile(r"^\s*\[(?P<pid>\d+)\]\s+(?P<name>.+?)@(?P<host>\S+)\s*$", re.ASCII)
_SECTION = re.compile(r"^\s*Section:(?P<name>.*)$")
_RULE = re.compile(r"^\s*(?P<type>OPT|INF|WRN|ERR|ERROR)\s{2,}(?P<text>\S.*)$")
_SEPARATOR = re.compile(r"^\s*-+(?: -+)*\s*$")


def _columns(separator: str) -> list[int]:
    return [m.start() for m in re.finditer(r"-+", separator)]


def _cuts_word(body: str, at: int) -> bool:
    return 0 < at < len(body) and body[at - 1] != " " and body[at] != " "


def _split_row(line: str, cols: list[int]) -> tuple[str, str, str] | None:
    body = line.rstrip()
    if any(_cuts_word(body, c) for c in cols[1:3]):
        return _split_loose(body)  # a cell overflowed its column: split on runs of spaces
    if len(cols) >= 3:
        return body[:cols[1]].strip(), body[cols[1]:cols[2]].strip(), body[cols[2]:].strip()
    if len(cols) == 2:
        return body[:cols[1]].strip(), "", body[cols[1]:].strip()
    return _split_loose(body)


def _split_loose(body: str) -> tuple[str, str, str] | None:
    parts = re.split(r"\s{2,}", body.strip())
    if len(parts) >= 3:
        return " ".join(parts[:-2]), parts[-2], parts[-1]
    if len(parts) == 2:
        tail = parts[1].split()
        if len(tail) == 2:
            return parts[0], tail[0], tail[1]
        return parts[0], "", parts[1]
    return None


def parse_details_text(text: str, path: str | Path | None = None) -> NcuReport:
    """The details page as text (what ``ncu`` prints, or ``ncu --import X --page details``)."""
    where = None if path is None else str(path)
    report = NcuReport(where, "details-text")
    lines = text.splitlines()
    launch: Launch | None = None
    section = ""
    process: tuple[int | None, str | None] = (None, None)
    state = "none"  # none | open (after a separator) | header | body
    cols: list[int] = []
    rule: Rule | None = None
    rule_lines: list[str] = []

    def close_rule() -> None:
        nonlocal rule
        if rule is not None and launch is not None:
            body = " ".join(rule_lines).strip()
            m = _SPEEDUP.match(body)
            if m:
                rule.speedup_type = (m.group(1) or "global").lower()
                rule.speedup_pct = parse_number(m.group(2))
                body = body[m.end():].strip()
            rule.text = body
            launch.rules.append(rule)
        rule = None
        rule_lines.clear()

    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("=="):
            if stripped.startswith(("==ERROR==", "==WARNING==")):
                report.notes.append(stripped)
            continue
        m = _PROCESS.match(line) if stripped.startswith("[") else None
        if m:
            close_rule()
            process = (_int(m.group("pid")), m.group("name"))
            state = "none"
            continue
        m = _KERNEL_HEADER.match(line) if ")x(" in line and "Context" in line else None
        if m:
            close_rule()
            launch = Launch(kernel=m.group("name").strip(), id=len(report.launches), grid=_dims(f"({m.group('g')})"),
                            block=_dims(f"({m.group('b')})"), context=_int(m.group("ctx")),
                            stream=_int(m.group("stream")), device=_int(m.group("dev")), cc=m.group("cc"),
                            process_id=process[0], process_name=process[1])
            report.launches.append(launch)
            section, state = "", "none"
            continue
        if launch is None:
            continue
        m = _SECTION.match(line)
        if m:
            close_rule()
            section, state = m.group("name").strip(), "none"
            continue
        if _SEPARATOR.match(line):
            close_rule()
            if state == "none":
                j = i + 1
                while j < len(lines) and not lines[j].strip():
                    j += 1
                nxt = lines[j] if j < len(lines) else ""
                if _RULE.match(nxt) or len(_columns(line)) < 2:
                    continue  # a separator between two rule paragraphs
                state, cols = "open", _columns(line)
            elif state == "header":
                state, cols = "body", _columns(line)
            else:
                state = "none"
            continue
        m = _RULE.match(line)
        if m:
            close_rule()
            state = "none"
            rule = Rule(section, "", "ERR" if m.group("type") == "ERROR" else m.group("type"), "")
            rule_lines.append(m.group("text").strip())
            continue
        if not stripped:
            if state == "none":
                close_rule()
            continue
        if state in ("open", "header") and "Metric Name" in line and "Metric Value" in line:
            state = "header"
            continue
        if state in ("open", "body", "header"):
            state = "body"
            parts = _split_row(line, cols)
            if parts is None or not parts[0]:
                continue
            name, raw_unit, raw_value = parts
            value, unit = normalize(raw_value, raw_unit)
            launch.metrics.append(Metric(section, name, value, unit, raw_value, raw_unit))
            continue
        if rule is not None:
            rule_lines.append(stripped)
    close_rule()
    if not report.launches:
        raise InputError(where, "no Nsight Compute kernel block found (expected a line like "
                         "'<kernel> (gx, gy, gz)x(bx, by, bz), Context N, Stream N, Device N, CC x.y')")
    return report


def parse_hand_json(data: Any, path: str | Path | None = None) -> NcuReport:
    """The hand workflow's result JSON: ``ncu_profile.rows[]`` with ``workload_uuid``, ``axes`` and
    ``output`` (the details text page, or a details/raw CSV export)."""
    where = None if path is None else str(path)
    if not isinstance(data, dict):
        raise InputError(where, "expected a JSON object with an 'ncu_profile' table")
    prof = data.get("ncu_profile")
    if not isinstance(prof, dict):
        raise InputError(where, "no 'ncu_profile' object in this JSON", field="ncu_profile")
    rows = prof.get("rows")
    if not isinstance(rows, list):
        raise InputError(where, "expected a list", field="ncu_profile.rows")
    report = NcuReport(where, "hand-json")
    for i, row in enumerate(rows):
        fname = f"ncu_profile.rows[{i}]"
        if not isinstance(row, dict):
            raise InputError(where, "expected an object", field=fname)
        uuid = row.get("workload_uuid")
        if uuid is not None and not isinstance(uuid, str):
            raise InputError(where, "expected a string", field=f"{fname}.workload_uuid")
        axes = row.get("axes")
        if axes is not None and not isinstance(axes, dict):
            raise InputError(where, "expected an object", field=f"{fname}.axes")
        output = row.get("output")
        if not isinstance(output, str) or not output.strip():
            reason = row.get("error") or row.get("status") or "no output"
            report.notes.append(f"row {i} ({uuid or 'no workload'}): no NCU output ({str(reason)[:200]})")
            continue
        try:
            sub = _parse_any_text(output, where)
        except InputError as exc:
            raise InputError(where, exc.message, field=f"{fname}.output") from None
        for launch in sub.launches:
            launch.workload = uuid
            launch.axes = dict(axes or {})
            report.launches.append(launch)
        report.notes.extend(f"row {i}: {n}" for n in sub.notes)
    if not report.launches:
        raise InputError(where, "no row of ncu_profile holds a kernel", field="ncu_profile.rows")
    return report


def _parse_any_text(text: str, where: str | None) -> NcuReport:
    lines = text.splitlines(keepends=True)
    start = _find_csv_header(lines)
    if start is not None:
        header, _ = _header(where, lines, start)
        if "Metric Name" in header and "Metric Value" in header:
            return parse_details_csv(text, where)
        if "Kernel Name" in header:
            return parse_raw_csv(text, where)
        raise InputError(where, "a CSV header without 'Kernel Name': not an Nsight Compute export", line=start + 1)
    return parse_details_text(text, where)


def parse_report_text(text: str, path: str | Path | None = None) -> NcuReport:
    """Any supported text: a hand-workflow JSON, a details or raw CSV, or a details text page."""
    where = None if path is None else str(path)
    head = text.lstrip("\ufeff").lstrip()
    if head.startswith("{") or (head.startswith("[") and not re.match(r"\[\d+\]\s", head)):
        try:
            data = json.loads(text.lstrip("\ufeff"))
        except json.JSONDecodeError as exc:
            raise InputError(where, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
        except RecursionError:
            raise InputError(where, "not valid JSON: nested too deeply") from None
        except ValueError:  # json refuses integers of more than 4300 digits
            raise InputError(where, "not valid JSON: a number with more than 4300 digits") from None
        return parse_hand_json(data, where)
    return _parse_any_text(text, where)


def merge_raw(details: NcuReport, raw: NcuReport) -> NcuReport:
    """Add the raw page's metrics to the details launches (matched by ID, else by order), so a
    field the details page lacks (spilling instructions, say) comes from the raw page."""
    by_id = {r.id: r for r in raw.launches if r.id is not None}
    for i, launch in enumerate(details.launches):
        other = by_id.get(launch.id) if launch.id is not None else None
        if other is None and launch.id is None and i < len(raw.launches):
            other = raw.launches[i]
        if other is not None and other.kernel == launch.kernel:
            launch.metrics.extend(other.metrics)
    return details


def load_exported(details_csv: str | Path, raw_csv: str | Path | None = None) -> NcuReport:
    """The pages :func:`fibtui.runners.ncu.profile` exports: the details CSV, plus the raw CSV's
    metrics where the details page lacks them."""
    details = load_report(details_csv)
    if raw_csv is not None and Path(raw_csv).is_file():
        details = merge_raw(details, load_report(raw_csv))
    return details


_FOLDER = "is a folder; give an NCU export file"


def load_report(path: str | Path, *, ncu: str | None = None, timeout_s: float = 300.0) -> NcuReport:
    """Read any supported NCU file (see the module docstring). A ``.ncu-rep`` needs ``ncu``."""
    p = Path(path)
    if p.suffix == ".ncu-rep":
        check_input_file(p, _FOLDER)  # a FIFO or a device is refused before ncu reads it
        details = parse_details_csv(export_page(p, "details", ncu=ncu, timeout_s=timeout_s), p)
        raw = parse_raw_csv(export_page(p, "raw", ncu=ncu, timeout_s=timeout_s), p)
        report = merge_raw(details, raw)
        report.source_format = "ncu-rep"
        return report
    data = read_input(p, folder_message=_FOLDER)  # never blocks: a FIFO, socket or device is refused
    if not data.strip():
        raise InputError(p, "file is empty")
    if b"\x00" in data[:4096]:
        raise InputError(p, "binary file; a binary Nsight Compute report must end in .ncu-rep")
    return parse_report_text(data.decode("utf-8", errors="replace"), p)


# --------------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------------

BUSY_PCT = 60.0
LAUNCH_GAP_SHARE = 0.5
GRID_TOO_SMALL_WAVES = 1.0
TAIL_FILL = 0.5
TAIL_MAX_WAVES = 4.0
IMBALANCE_RATIO = 0.8
FULL_OCCUPANCY_PCT = 99.5
L2_HIT_LOW_PCT = 60.0
CROSS_BLOCK_L2_HIT_PCT = 80.0
CROSS_BLOCK_DRAM_GAP_PCT = 15.0

# Tactic families per diagnosis (docs/diagnosis.md, "Tactic families").
TACTICS: dict[str, tuple[str, ...]] = {
    "memory": (
        "wide (16-byte) coalesced loads and stores",
        "fuse neighbouring steps so intermediates never round-trip through global memory",
        "cache-policy hints (evict-first for streamed data, keep reused data)",
        "register budgeting so more loads stay in flight",
    ),
    "l2_persistence": ("L2 persistence / access-policy window for read-mostly metadata (check that the persisting size changed)",),
    "cross_block": ("thread-block clusters + distributed shared memory for data several blocks re-read (compare cluster sizes)",),
    "compute": (
        "tensor-core instructions (wgmma on Hopper, tcgen05 on Blackwell)",
        "warp specialization (producer / consumer warps)",
        "epilogue fusion",
        "more pipeline stages",
    ),
    "latency": (
        "more independent work in flight per warp (unroll, issue several loads before their first use)",
        "higher occupancy (fewer registers, smaller tiles)",
        "fewer barriers and shorter dependency chains",
        "deeper multi-stage pipelines with async copies (TMA completing on mbarriers)",
    ),
    "launch": (
        "fuse the kernels of one call",
        "overlap launches (programmatic dependent launch)",
        "CUDA graphs for the whole call",
    ),
    "registers": (
        "register budgeting (__launch_bounds__ / maxrregcount; num_warps in Triton)",
        "smaller tiles per thread",
        "split the kernel",
        "on Blackwell, accumulators in tensor memory",
    ),
    "shared_memory": (
        "smaller shared-memory tiles or fewer pipeline stages",
        "opt in to the larger dynamic shared-memory carveout",
        "reuse shared buffers across stages",
    ),
    "warps": ("smaller blocks (fewer warps per block) so more blocks fit per SM",),
    "blocks": ("more work per block (larger tiles): the per-SM block count is the cap",),
    "barriers": ("fewer named barriers per block",),
    "grid": (
        "split the work finer (row / head / sequence tiling, split-K)",
        "persistent kernel with a tile scheduler",
        "on Blackwell, Cluster Launch Control work stealing",
    ),
    "tail": (
        "persistent kernel / work stealing so the last wave is not half empty",
        "tile-shape tuning so the block count fills whole waves",
    ),
    "imbalance": (
        "persistent kernel with dynamic tile scheduling (work stealing)",
        "even out the work per block (bin or sort uneven rows / experts; grouped GEMM for MoE)",
    ),
    "spilling": (
        "cut live registers (smaller tiles, fewer unrolled accumulators)",
        "raise the register budget where occupancy allows (launch bounds, fewer warps)",
        "avoid dynamically indexed local arrays",
    ),
}


@dataclass
class HostGaps:
    """A host-side measurement of one call (e.g. from a torch-profiler trace): idle time between
    kernel launches and the device time of the kernels themselves."""

    gap_us: float
    busy_us: float
    launches: int | None = None
    source: str = ""

    @property
    def gap_share(self) -> float | None:
        span = self.gap_us + self.busy_us
        return self.gap_us / span if span > 0 else None


@dataclass
class Finding:
    kind: str  # memory-bound | compute-bound | latency-bound | launch-bound | occupancy-limited |
    #            grid-too-small | tail-effect | scheduling-imbalance | local-memory-spilling
    summary: str
    evidence: dict[str, Any]
    tactics: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "summary": self.summary, "evidence": self.evidence, "tactics": self.tactics}


@dataclass
class Classification:
    bottleneck: str | None  # memory | compute | latency | launch | None (no throughput numbers)
    device_bottleneck: str | None  # the class from the device metrics alone
    limiter: str | None  # registers | shared_memory | warps | blocks | barriers | None
    grid_too_small: bool
    findings: list[Finding] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def tactics(self) -> list[dict[str, str]]:
        """Every tactic with the finding (and its numbers) it would relieve."""
        out: list[dict[str, str]] = []
        seen: set[str] = set()
        for f in self.findings:
            for t in f.tactics:
                if t not in seen:
                    seen.add(t)
                    out.append({"tactic": t, "relieves": f"{f.kind}: {f.summary}"})
        return out


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "?"
    text = f"{value:.2f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.3g}"
    return f"{text}{unit}"


def classify(metrics: Mapping[str, Any], host: HostGaps | None = None) -> Classification:
    """Classify one kernel from its compact fields (the keys of :data:`FIELDS`; missing keys are
    unknown). See the thresholds table in the module docstring."""

    def num(key: str) -> float | None:
        v = metrics.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None

    compute, memory, dram = num("compute_throughput_pct"), num("memory_throughput_pct"), num("dram_throughput_pct")
    l2_hit = num("l2_hit_rate_pct")
    theo, achieved = num("theoretical_occupancy_pct"), num("achieved_occupancy_pct")
    waves = num("waves_per_sm")
    findings: list[Finding] = []
    evidence: dict[str, Any] = {"compute_throughput_pct": compute, "memory_throughput_pct": memory,
                                "dram_throughput_pct": dram, "busy_threshold_pct": BUSY_PCT}

    # -- the device bottleneck (Speed Of Light)
    mem_level = max((v for v in (memory, dram) if v is not None), default=None)
    device: str | None = None
    if compute is not None or mem_level is not None:
        c, mm = compute or 0.0, mem_level or 0.0
        sol = {"compute_throughput_pct": compute, "memory_throughput_pct": memory, "dram_throughput_pct": dram,
               "busy_threshold_pct": BUSY_PCT}
        if mm >= BUSY_PCT and mm >= c:
            device = "memory"
            tactics = list(TACTICS["memory"])
            if l2_hit is not None and l2_hit < L2_HIT_LOW_PCT:
                tactics += TACTICS["l2_persistence"]
                sol["l2_hit_rate_pct"] = l2_hit
            if (l2_hit is not None and l2_hit >= CROSS_BLOCK_L2_HIT_PCT and memory is not None
                    and dram is not None and memory - dram >= CROSS_BLOCK_DRAM_GAP_PCT):
                tactics += TACTICS["cross_block"]
                sol["l2_hit_rate_pct"] = l2_hit
            findings.append(Finding("memory-bound", f"memory throughput {_fmt(mm, '%')} >= {_fmt(BUSY_PCT, '%')} of peak "
                                    f"and above compute ({_fmt(compute, '%')})", sol, tactics))
        elif c >= BUSY_PCT:
            device = "compute"
            findings.append(Finding("compute-bound", f"compute (SM) throughput {_fmt(c, '%')} >= {_fmt(BUSY_PCT, '%')} "
                                    f"of peak and above memory ({_fmt(mem_level, '%')})", sol, list(TACTICS["compute"])))
        else:
            device = "latency"
            findings.append(Finding("latency-bound", f"compute {_fmt(compute, '%')} and memory {_fmt(mem_level, '%')} "
                                    f"throughput both under {_fmt(BUSY_PCT, '%')} of peak: units idle while warps wait",
                                    sol, list(TACTICS["latency"])))
    bottleneck = device

    # -- launch-bound: only from a host measurement
    if host is not None:
        share = host.gap_share
        evidence.update({"host_gap_us": host.gap_us, "host_busy_us": host.busy_us, "host_gap_share": share,
                         "launch_gap_share_threshold": LAUNCH_GAP_SHARE})
        if share is not None and share >= LAUNCH_GAP_SHARE:
            bottleneck = "launch"
            ev = {"host_gap_us": host.gap_us, "host_busy_us": host.busy_us, "host_gap_share": round(share, 4),
                  "launches": host.launches, "threshold": LAUNCH_GAP_SHARE}
            findings.insert(0, Finding("launch-bound", f"host gaps {_fmt(host.gap_us, ' us')} are {_fmt(share * 100, '%')} "
                                       f"of the call (kernels busy {_fmt(host.busy_us, ' us')})", ev, list(TACTICS["launch"])))

    # -- the occupancy limiter: the smallest block limit
    limits = {name: num(key) for name, key in LIMITS.items()}
    known = {k: v for k, v in limits.items() if v is not None}
    limiter: str | None = None
    if known:
        smallest = min(known.values())
        tied = [k for k, v in known.items() if v == smallest]
        limiter = tied[0]
        ev = {f"block_limit_{k}": v for k, v in known.items()}
        ev.update({"theoretical_occupancy_pct": theo, "registers_per_thread": num("registers_per_thread")})
        evidence.update({"limiter": limiter, "block_limits": {k: v for k, v in known.items()}})
        if theo is not None and theo < FULL_OCCUPANCY_PCT:
            tie = f" (tied with {', '.join(tied[1:])})" if len(tied) > 1 else ""
            tactics = [t for k in tied for t in TACTICS[k]]
            findings.append(Finding("occupancy-limited", f"theoretical occupancy {_fmt(theo, '%')}, limited by {limiter}{tie}: "
                                    f"{_fmt(smallest)} blocks/SM", ev, tactics))

    # -- grid too small / tail effect
    grid_too_small = waves is not None and waves < GRID_TOO_SMALL_WAVES
    if waves is not None:
        evidence["waves_per_sm"] = waves
    if grid_too_small:
        ev = {"waves_per_sm": waves, "grid_blocks": num("grid_blocks"), "sm_count": num("sm_count"),
              "threshold": GRID_TOO_SMALL_WAVES}
        findings.append(Finding("grid-too-small", f"{_fmt(waves)} waves per SM: part of the GPU idles for the whole kernel",
                                ev, list(TACTICS["grid"])))
    elif waves is not None and waves < TAIL_MAX_WAVES:
        fill = waves - math.floor(waves)
        if 0 < fill < TAIL_FILL:
            ev = {"waves_per_sm": waves, "last_wave_fill": round(fill, 4), "threshold": TAIL_FILL}
            findings.append(Finding("tail-effect", f"{_fmt(waves)} waves per SM: the last wave is {_fmt(fill * 100, '%')} full",
                                    ev, list(TACTICS["tail"])))

    # -- achieved far under theoretical
    if theo is not None and achieved is not None and theo > 0:
        ratio = achieved / theo
        evidence.update({"theoretical_occupancy_pct": theo, "achieved_occupancy_pct": achieved})
        if ratio < IMBALANCE_RATIO:
            ev = {"theoretical_occupancy_pct": theo, "achieved_occupancy_pct": achieved,
                  "achieved_over_theoretical": round(ratio, 4), "threshold": IMBALANCE_RATIO}
            findings.append(Finding("scheduling-imbalance", f"achieved occupancy {_fmt(achieved, '%')} is "
                                    f"{_fmt(ratio * 100, '%')} of theoretical {_fmt(theo, '%')}: warps finish unevenly "
                                    "or blocks start late", ev, list(TACTICS["imbalance"])))

    # -- local-memory spilling
    spill_req, spill_pct = num("local_spilling_requests"), num("local_spilling_overhead_pct")
    spill_inst = num("register_spilling_instructions")
    if any(v is not None and v > 0 for v in (spill_req, spill_pct, spill_inst)):
        ev = {"local_spilling_requests": spill_req, "local_spilling_overhead_pct": spill_pct,
              "register_spilling_instructions": spill_inst, "registers_per_thread": num("registers_per_thread")}
        findings.append(Finding("local-memory-spilling", f"registers spill to local memory ({_fmt(spill_req)} requests, "
                                f"{_fmt(spill_pct, '%')} overhead)", ev, list(TACTICS["spilling"])))
    return Classification(bottleneck, device, limiter, grid_too_small, findings, evidence)


# --------------------------------------------------------------------------------------------
# The compact table
# --------------------------------------------------------------------------------------------


def request_path_for(report_file: str | Path) -> Path | None:
    """The worker profile request saved next to a report (``X_request.json`` beside
    ``X.ncu-rep`` / ``X_details.csv`` / ``X_raw.csv`` / ``X_details.txt``), if any."""
    p = Path(report_file)
    stem = p.name
    for suffix in (".ncu-rep", "_details.csv", "_raw.csv", "_details.txt"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    else:
        return None
    candidate = p.with_name(stem + "_request.json")
    return candidate if candidate.is_file() else None


def attach_workloads(report: NcuReport, workloads: Sequence[Mapping[str, Any]]) -> NcuReport:
    """Give each launch its workload and axes. The worker profiles one range per workload in
    request order with the same calls each, so launches split evenly across the workloads."""
    if not workloads or not report.launches or len(report.launches) % len(workloads):
        return report
    per = len(report.launches) // len(workloads)
    for i, launch in enumerate(report.launches):
        w = workloads[i // per]
        launch.workload = str(w.get("uuid")) if w.get("uuid") is not None else None
        axes = w.get("axes")
        launch.axes = dict(axes) if isinstance(axes, Mapping) else {}
    return report


def attach_request(report: NcuReport, report_file: str | Path) -> NcuReport:
    """Attach workloads from the profile request saved beside ``report_file`` (when there is one)."""
    req = request_path_for(report_file)
    if req is None:
        return report
    try:
        data = json.loads(req.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return report
    workloads = data.get("workloads") if isinstance(data, dict) else None
    if isinstance(workloads, list) and all(isinstance(w, Mapping) for w in workloads):
        attach_workloads(report, workloads)
    return report


def band_of(launch: Launch) -> str | None:
    """The band label of a launch: its axes (``batch_size=64``), else its workload, else None."""
    if launch.axes:
        return ",".join(f"{k}={v}" for k, v in launch.axes.items())
    return launch.workload


@dataclass
class KernelSummary:
    name: str
    instances: int
    band: str | None
    workload: str | None
    axes: dict[str, Any]
    launch_id: int | None
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    metrics: dict[str, float | None]
    total_duration_us: float | None
    classification: Classification
    rules: list[Rule] = field(default_factory=list)

    def get(self, key: str) -> float | None:
        return self.metrics.get(key)

    @property
    def bottleneck(self) -> str | None:
        return self.classification.bottleneck

    @property
    def limiter(self) -> str | None:
        return self.classification.limiter

    def to_json(self) -> dict[str, Any]:
        c = self.classification
        return {
            "name": self.name, "instances": self.instances, "band": self.band, "workload": self.workload,
            "axes": self.axes, "launch_id": self.launch_id,
            "grid": list(self.grid) if self.grid else None, "block": list(self.block) if self.block else None,
            **self.metrics, "total_duration_us": self.total_duration_us,
            "bottleneck": c.bottleneck, "device_bottleneck": c.device_bottleneck, "limiter": c.limiter,
            "grid_too_small": c.grid_too_small, "evidence": c.evidence,
            "findings": [f.to_json() for f in c.findings], "tactics": c.tactics,
            "rules": [r.to_json() for r in self.rules if r.type in ("OPT", "WRN", "ERR")],
        }


def summarize(report: NcuReport | Iterable[Launch], host: HostGaps | None = None) -> list[KernelSummary]:
    """One row per (band, kernel name): the slowest instance, how many instances, the total."""
    launches = report.launches if isinstance(report, NcuReport) else list(report)
    groups: dict[tuple[str | None, str], list[tuple[Launch, dict[str, float | None]]]] = {}
    for launch in launches:
        groups.setdefault((band_of(launch), launch.kernel), []).append((launch, launch_fields(launch)))
    out: list[KernelSummary] = []
    for (band, name), items in groups.items():
        slowest, fields = max(items, key=lambda it: it[1]["duration_us"] if it[1]["duration_us"] is not None else -math.inf)
        durations = [f["duration_us"] for _, f in items if f["duration_us"] is not None]
        out.append(KernelSummary(
            name=name, instances=len(items), band=band, workload=slowest.workload, axes=dict(slowest.axes),
            launch_id=slowest.id, grid=slowest.grid, block=slowest.block, metrics=fields,
            total_duration_us=sum(durations) if durations else None, classification=classify(fields, host),
            rules=list(slowest.rules),
        ))
    return out


def report_to_json(report: NcuReport, summaries: list[KernelSummary]) -> dict[str, Any]:
    return {"source": report.path, "source_format": report.source_format, "launches": len(report.launches),
            "kernels": [s.to_json() for s in summaries], "shape_matrix": shape_matrix(summaries),
            "notes": report.notes}


# --------------------------------------------------------------------------------------------
# Shape matrix and diff
# --------------------------------------------------------------------------------------------


def _weight(s: KernelSummary) -> float:
    for v in (s.total_duration_us, s.get("duration_us")):
        if v is not None:
            return v
    return -math.inf


def shape_matrix(bands: Mapping[str, NcuReport | Sequence[KernelSummary]] | Sequence[KernelSummary],
                 host: HostGaps | None = None) -> list[dict[str, Any]]:
    """Band -> dominant kernel (the most device time: total over its instances) -> bottleneck ->
    limiter, as a list of ``{band, workload, kernel, bottleneck, limiter}``.

    Give either ``{band label: report or summaries}`` or one list of summaries (grouped by their
    own ``band``)."""
    grouped: dict[str | None, list[KernelSummary]] = {}
    if isinstance(bands, Mapping):
        for label, item in bands.items():
            summaries = summarize(item, host) if isinstance(item, NcuReport) else list(item)
            grouped.setdefault(label, []).extend(summaries)
    else:
        for s in bands:
            grouped.setdefault(s.band, []).append(s)
    rows: list[dict[str, Any]] = []
    for label, summaries in grouped.items():
        if not summaries:
            continue
        top = max(summaries, key=_weight)
        rows.append({"band": label, "workload": top.workload, "kernel": top.name,
                     "bottleneck": top.bottleneck, "limiter": top.limiter})
    return rows


DIFF_FIELDS: tuple[str, ...] = (
    "duration_us", "compute_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l2_hit_rate_pct",
    "registers_per_thread", "dynamic_shared_memory_bytes", "static_shared_memory_bytes",
    "theoretical_occupancy_pct", "achieved_occupancy_pct", "waves_per_sm", "grid_blocks", "block_threads",
    "block_limit_registers", "block_limit_shared_memory", "block_limit_warps", "block_limit_blocks",
    "l2_persisting_size_bytes", "local_spilling_requests",
)


@dataclass
class MetricDelta:
    metric: str
    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before

    @property
    def pct(self) -> float | None:
        d = self.delta
        return None if d is None or not self.before else d / abs(self.before) * 100.0

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "before": self.before, "after": self.after, "delta": self.delta, "pct": self.pct}


@dataclass
class KernelDiff:
    band: str | None
    kernel: str
    baseline: KernelSummary
    candidate: KernelSummary
    metrics: list[MetricDelta]

    @property
    def changes(self) -> list[str]:
        """Classification changes, in words (empty when nothing changed)."""
        out = []
        b, c = self.baseline.classification, self.candidate.classification
        if b.bottleneck != c.bottleneck:
            out.append(f"bottleneck {b.bottleneck or '?'} -> {c.bottleneck or '?'}")
        if b.limiter != c.limiter:
            out.append(f"limiter {b.limiter or 'none'} -> {c.limiter or 'none'}")
        if b.grid_too_small != c.grid_too_small:
            out.append("grid too small" if c.grid_too_small else "grid no longer too small")
        kinds_b = {f.kind for f in b.findings}
        kinds_c = {f.kind for f in c.findings}
        out += [f"new finding: {k}" for k in sorted(kinds_c - kinds_b) if not k.endswith("-bound")]
        out += [f"gone: {k}" for k in sorted(kinds_b - kinds_c) if not k.endswith("-bound")]
        return out

    @property
    def classification_changed(self) -> bool:
        b, c = self.baseline.classification, self.candidate.classification
        return (b.bottleneck, b.limiter, b.grid_too_small) != (c.bottleneck, c.limiter, c.grid_too_small)

    def to_json(self) -> dict[str, Any]:
        b, c = self.baseline.classification, self.candidate.classification
        return {"band": self.band, "kernel": self.kernel,
                "instances": {"before": self.baseline.instances, "after": self.candidate.instances},
                "bottleneck": {"before": b.bottleneck, "after": c.bottleneck},
                "limiter": {"before": b.limiter, "after": c.limiter},
                "classification_changed": self.classification_changed, "changes": self.changes,
                "metrics": [m.to_json() for m in self.metrics]}


@dataclass
class ReportDiff:
    pairs: list[KernelDiff]
    only_in_baseline: list[tuple[str | None, str]]
    only_in_candidate: list[tuple[str | None, str]]

    def to_json(self) -> dict[str, Any]:
        return {"pairs": [p.to_json() for p in self.pairs],
                "only_in_baseline": [{"band": b, "kernel": k} for b, k in self.only_in_baseline],
                "only_in_candidate": [{"band": b, "kernel": k} for b, k in self.only_in_candidate],
                "classification_changed": [{"band": p.band, "kernel": p.kernel, "changes": p.changes}
                                           for p in self.pairs if p.classification_changed]}


def _base_name(name: str) -> str:
    """``void k<float>(float*, int)`` -> ``k``: for matching a mangled/demangled pair."""
    head = re.split(r"[(<]", name, maxsplit=1)[0].strip()
    return head.split()[-1] if head.split() else name


def diff_kernel(base: KernelSummary, cand: KernelSummary) -> KernelDiff:
    deltas = [MetricDelta(k, base.get(k), cand.get(k)) for k in DIFF_FIELDS
              if base.get(k) is not None or cand.get(k) is not None]
    return KernelDiff(base.band if base.band is not None else cand.band, base.name, base, cand, deltas)


def diff_summaries(base: Sequence[KernelSummary], cand: Sequence[KernelSummary]) -> ReportDiff:
    """Match kernels by (band, name); a side without bands matches by name alone; a last pass
    matches on the bare function name. Unmatched kernels are listed per side."""
    left, right = list(base), list(cand)
    pairs: list[KernelDiff] = []

    def match(key) -> None:
        for b in list(left):
            for c in right:
                if key(b, c):
                    pairs.append(diff_kernel(b, c))
                    left.remove(b)
                    right.remove(c)
                    break

    match(lambda b, c: b.band == c.band and b.name == c.name)
    match(lambda b, c: (b.band is None or c.band is None) and b.name == c.name)
    match(lambda b, c: (b.band == c.band or b.band is None or c.band is None) and _base_name(b.name) == _base_name(c.name))
    return ReportDiff(pairs, [(s.band, s.name) for s in left], [(s.band, s.name) for s in right])


def diff_reports(base: NcuReport, cand: NcuReport, host_base: HostGaps | None = None,
                 host_cand: HostGaps | None = None) -> ReportDiff:
    return diff_summaries(summarize(base, host_base), summarize(cand, host_cand))


def diff_bands(base: Mapping[str, NcuReport | Sequence[KernelSummary]],
               cand: Mapping[str, NcuReport | Sequence[KernelSummary]]) -> ReportDiff:
    """Per band: ``{band label: report}`` on each side; kernels are relabelled with the band."""

    def flatten(side: Mapping[str, NcuReport | Sequence[KernelSummary]]) -> list[KernelSummary]:
        out = []
        for label, item in side.items():
            for s in (summarize(item) if isinstance(item, NcuReport) else item):
                out.append(KernelSummary(**{**s.__dict__, "band": label}))
        return out

    return diff_summaries(flatten(base), flatten(cand))


# --------------------------------------------------------------------------------------------
# Display: metric values and report labels (plain strings, shared by the TUI and the CLI)
# --------------------------------------------------------------------------------------------

#: Fields that count whole things (registers, blocks, threads, bytes, requests, SMs): an integer
#: value prints without decimals (``2048.0`` -> ``2,048``).
COUNT_FIELDS: frozenset[str] = frozenset({
    "registers_per_thread", "dynamic_shared_memory_bytes", "static_shared_memory_bytes", "grid_blocks",
    "block_threads", "block_limit_registers", "block_limit_shared_memory", "block_limit_warps",
    "block_limit_blocks", "block_limit_barriers", "l2_persisting_size_bytes", "local_spilling_requests",
    "register_spilling_instructions", "sm_count",
})


def format_metric(value: Any, field: str | None = None) -> str:
    """One metric value for a table: ``-`` when unknown; an integer value of a count field
    (:data:`COUNT_FIELDS`) or a Python int without decimals, with thousands separators
    (``2,048``); any other number with 2 decimals (``4.70``, ``1,234.50``), or without decimals
    from a million up; text as it is."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if field in COUNT_FIELDS and value.is_integer():
        return f"{value:,.0f}"
    return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"


ELLIPSIS = "…"


def abbreviate_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by replacing its middle with ``…`` (the head keeps
    the larger half); unchanged when it fits."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    head = (keep + 1) // 2
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head):]


def report_name(path: str | Path) -> str:
    """The label of a report file: its name without the ``_details`` of the page
    (``x_details.csv`` -> ``x.csv``)."""
    return re.sub(r"_details(?=\.[A-Za-z0-9]+$)", "", Path(path).name)


def _split_ext(label: str) -> tuple[str, str]:
    stem, dot, ext = label.rpartition(".")
    if dot and stem and 0 < len(ext) <= 8 and ext.isalnum():
        return stem, "." + ext
    return label, ""


def _token_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` that ends just after a separator
    (``_``, ``-``, ``.``, ``/``)."""
    n = 0
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            break
        if x in "_-./":
            n = i + 1
    return n


def _whole_labels(paths: Sequence[str | Path]) -> list[str]:
    """Each report's label; equal names (one file name in two folders) take as many parent
    folders as they need to differ."""
    parts = [Path(p).parts for p in paths]
    labels = [report_name(p) for p in paths]
    depth = 1
    while len(set(labels)) < len(labels) and depth < max((len(p) for p in parts), default=1):
        seen: dict[str, int] = {}
        for lab in labels:
            seen[lab] = seen.get(lab, 0) + 1
        labels = [("/".join(pp[max(0, len(pp) - 1 - depth):-1]) + "/" + report_name(p)) if seen[lab] > 1 else lab
                  for lab, pp, p in zip(labels, parts, paths, strict=True)]
        depth += 1
    return labels


def report_labels(paths: Sequence[str | Path], width: int) -> list[str]:
    """Labels for a list of report files, at most ``width`` characters where that can be done
    without two labels reading the same.

    A label is the file name without ``_details`` (:func:`report_name`). One that is too long
    drops a leading part it shares with another report (``…`` in its place): the longest such
    part after which it still fits, else the longest there is, so what is left starts where the
    report differs from its nearest neighbour. If that is still too long, the rest is cut before
    the extension (``…demo_gdn_decode_triton_v1_a8ef….csv``). A label that would then read like
    another one is shown whole; so the labels are always distinct (distinct paths give distinct
    whole labels: a file name found in two folders carries its folder)."""
    whole = _whole_labels(paths)
    stems = [_split_ext(label)[0] for label in whole]
    out: list[str] = []
    for i, label in enumerate(whole):
        if len(label) <= width:
            out.append(label)
            continue
        stem, ext = _split_ext(label)
        cuts = sorted({_token_prefix(stem, o) for j, o in enumerate(stems) if j != i and o != stem} - {0})
        cuts = [c for c in cuts if c < len(stem)]
        fitting = [c for c in cuts if len(ELLIPSIS) + len(stem) - c + len(ext) <= width]
        cut = fitting[0] if fitting else (cuts[-1] if cuts else 0)
        head = ELLIPSIS if cut else ""
        rest = stem[cut:]
        short = head + rest + ext
        if len(short) > width:
            budget = width - len(head) - len(ext) - len(ELLIPSIS)
            short = head + rest[:budget] + ELLIPSIS + ext if budget > 0 else abbreviate_middle(label, width)
        out.append(short)
    # whatever still collides is shown whole (whole labels never collide with each other)
    while True:
        count: dict[str, int] = {}
        for label in out:
            count[label] = count.get(label, 0) + 1
        clash = [i for i, label in enumerate(out) if count[label] > 1 and label != whole[i]]
        if not clash:
            return out
        for i in clash:
            out[i] = whole[i]
