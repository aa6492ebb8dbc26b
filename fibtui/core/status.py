"""Evaluation statuses: the kernel's own outcomes, kept apart from infrastructure failures."""

from __future__ import annotations

PASSED = "PASSED"

#: What the official evaluator can say about a kernel.
KERNEL_STATUSES = (
    "PASSED",
    "INCORRECT_SHAPE",
    "INCORRECT_NUMERICAL",
    "INCORRECT_DTYPE",
    "RUNTIME_ERROR",
    "COMPILE_ERROR",
    "TIMEOUT",
)

#: What fibtui's gate catches beyond the official evaluator's checks (docs/measurement.md, "A gate
#: no candidate can game"): the kernel's own failures all the same, never retried.
#: INCORRECT_TIMED: a sampled timed call's output was wrong for the inputs it had (an answer
#: saved from an earlier call); INPUT_MUTATED: the call changed an input the definition does not
#: name as an output; CACHED_TIMING: the timed calls did not do the work a call on inputs the
#: solution had never seen does (they launched nothing, none of its kernels, or took a fraction of
#: its time); HARNESS_TAMPERED: the solution changed what fibtui's timer or judge relies on.
GATE_STATUSES = ("INCORRECT_TIMED", "INPUT_MUTATED", "CACHED_TIMING", "HARNESS_TAMPERED")

#: Failures of the machinery around the kernel (a lost container, an unparsable console line, a
#: worker that died before the job started). They say nothing about the kernel; they are retried.
INFRA_STATUSES = ("INFRA_ERROR", "PARSE_ERROR", "ERROR")

#: What this machine cannot do (build CUDA without a GPU or nvcc, import a DSL that is not
#: installed): the kernel was not judged here. Never the kernel's failure, and never retried
#: (the same machine would say the same); fibtui's own status, not the official evaluator's.
TOOL_STATUSES = ("UNSUPPORTED_HERE",)

ALL_STATUSES = KERNEL_STATUSES + GATE_STATUSES + INFRA_STATUSES + TOOL_STATUSES


def is_tool_limit(status: str) -> bool:
    return status in TOOL_STATUSES
