"""The settings' defaults, the verdict words and the timing kinds the statistics know."""

from __future__ import annotations

from fibtui.core.locations import AA_FILE as AA_FILE
from fibtui.core.measurement import CPU_INTERPRETER as CPU_INTERPRETER

DEFAULT_MIN_GAIN = 0.01
DEFAULT_CONFIDENCE = 0.95
DEFAULT_GUARD_MARGIN = 0.05
DEFAULT_TIE_BAND = 0.005
GUARD_ALPHA = 0.05
MIN_NOISE = 0.003
DEFAULT_NOISE = 0.02
T_MIN_WORKLOADS = 3
BOOTSTRAP_MIN_WORKLOADS = 20
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0

PROMOTE = "PROMOTE"
REJECT = "REJECT"
INCONCLUSIVE = "INCONCLUSIVE"
BLOCKED = "BLOCKED"
INCOMPLETE = "INCOMPLETE"
#: every job of both arms ran and some rows are wrong (INCORRECT_*, RUNTIME_ERROR, COMPILE_ERROR,
#: TIMEOUT, a failed check): the candidate or the baseline fails, nothing is missing to retry
INCORRECT = "INCORRECT"
#: statuses that say a job did not run to a verdict of the kernel (retry it): missing, not wrong
NOT_RUN_STATUSES = frozenset({"INFRA_ERROR", "PENDING", "SKIPPED", "QUEUED", "RUNNING"})
#: a solution could not be judged on this machine (UNSUPPORTED_HERE rows): no speed verdict, and
#: not the kernel's failure either
NOT_JUDGED = "NOT_JUDGED"
#: the arms' timings cannot decide speed (CPU-interpreter wall times, or the arms timed differently
#: or on different devices): correctness only
NO_SPEED_VERDICT = "NO_SPEED_VERDICT"
