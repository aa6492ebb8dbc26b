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

#: Failures of the machinery around the kernel (a lost container, an unparsable console line, a
#: worker that died before the job started). They say nothing about the kernel; they are retried.
INFRA_STATUSES = ("INFRA_ERROR", "PARSE_ERROR", "ERROR")

ALL_STATUSES = KERNEL_STATUSES + INFRA_STATUSES

#: Statuses that carry correctness numbers in the official format.
WITH_CORRECTNESS = ("PASSED", "INCORRECT_NUMERICAL")


def is_infra(status: str) -> bool:
    return status in INFRA_STATUSES


def is_known(status: str) -> bool:
    return status in ALL_STATUSES
