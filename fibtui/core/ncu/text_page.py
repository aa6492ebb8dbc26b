"""The details page as text (what ``ncu`` prints, or ``ncu --import X --page details``): kernel
blocks headed ``<kernel> (gx, gy, gz)x(bx, by, bz), Context N, Stream N, Device N, CC x.y``,
``Section:`` tables of ``Metric Name / Metric Unit / Metric Value`` between dash separator lines,
and ``OPT`` / ``INF`` / ``WRN`` rule paragraphs."""

from __future__ import annotations

import re
from pathlib import Path

from fibtui.core.errors import InputError
from fibtui.core.ncu.records import Launch, Metric, NcuReport, Rule
from fibtui.core.ncu.units import cell_int, dims, normalize, parse_number

_SPEEDUP = re.compile(r"^Est\.\s+(?:(Local|Global)\s+)?Speedup:\s*([-+\d.,eE]+)\s*%\s*", re.IGNORECASE)

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
            process = (cell_int(m.group("pid")), m.group("name"))
            state = "none"
            continue
        m = _KERNEL_HEADER.match(line) if ")x(" in line and "Context" in line else None
        if m:
            close_rule()
            launch = Launch(kernel=m.group("name").strip(), id=len(report.launches), grid=dims(f"({m.group('g')})"),
                            block=dims(f"({m.group('b')})"), context=cell_int(m.group("ctx")),
                            stream=cell_int(m.group("stream")), device=cell_int(m.group("dev")), cc=m.group("cc"),
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
