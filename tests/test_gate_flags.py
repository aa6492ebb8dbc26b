"""The gate's checks of kept calls, made in few kernels: ``check.mismatch_flags`` (every kept
output of a job against its reference, in stacks) gives the same pass/fail as the per-pair
``check.mismatch_flag`` and as the evaluator's ``compare``; ``Rotation.input_flag`` (one flag
for all of a kept call's inputs) is up exactly when ``Rotation.input_changes`` names one."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fibtui.worker import check  # noqa: E402
from fibtui.worker.check import Tolerance  # noqa: E402
from fibtui.worker.rotation import Rotation  # noqa: E402


def _pairs() -> list[tuple[object, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    ref = torch.randn(4, 33, generator=g)
    out = []
    out.append((ref.clone(), ref))  # equal
    near = ref + 1e-4
    out.append((near, ref))  # within tolerance
    far = ref.clone()
    far[1, 3] += 5.0
    out.append((far, ref))  # one element off
    nan = ref.clone()
    nan[0, 0] = float("nan")
    out.append((nan, ref))  # a NaN in the output fails
    ref_nan = ref.clone()
    ref_nan[2, 2] = float("nan")
    out.append((ref_nan.clone(), ref_nan))  # a NaN in both
    inf = ref.clone()
    inf[3, 1] = float("inf")
    out.append((inf, ref))
    out.append((ref[:, :32].clone(), ref))  # another shape
    out.append((ref.to(torch.float64), ref))  # another dtype
    out.append(("not a tensor", ref))
    empty = torch.empty(0, 5)
    out.append((empty.clone(), empty))
    half_ref = torch.randn(8, 8, generator=g).to(torch.bfloat16)
    out.append((half_ref.clone(), half_ref))
    off = half_ref.clone()
    off[0] += 1
    out.append((off, half_ref))
    return out


@pytest.mark.parametrize("ratio", [1.0, 0.9])
@pytest.mark.parametrize("stack_bytes", [check.STACK_BYTES, 200])
def test_stacked_flags_agree_with_each_pairs_flag(
    ratio: float, stack_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check, "STACK_BYTES", stack_bytes)  # 200: a stack of one
    tol = Tolerance(atol=1e-2, rtol=1e-2, matched_ratio=ratio)
    pairs = _pairs() * 3  # several pairs of each shape: stacks of many
    outs, refs = [p[0] for p in pairs], [p[1] for p in pairs]
    got = check.mismatch_flags(outs, refs, tol).tolist()
    one_by_one = [bool(check.mismatch_flag(o, r, tol)) for o, r in pairs]
    assert got == one_by_one
    assert got[:12] == [
        False,
        False,
        ratio == 1.0,  # one element in 132 off: passes when 10% may be
        True,  # a NaN fails whatever the ratio, as in flashinfer-bench
        True,  # and so it does when the reference has one there too
        True,  # an infinity likewise
        True,
        True,
        True,
        False,
        False,
        True,  # a whole row of 8 in 64 off: past 10%
    ]
    # and the evaluator's compare agrees on every comparable pair
    for (o, r), flag in zip(pairs[:12], got[:12], strict=True):
        if isinstance(o, torch.Tensor) and o.shape == r.shape and o.dtype == r.dtype:
            verdict = check.compare([o], [r], ["y"], tol)
            assert (verdict.status != "PASSED") == flag, (verdict, flag)


def test_no_pairs_no_flags() -> None:
    assert check.mismatch_flags([], [], Tolerance()).numel() == 0


def _rotation() -> Rotation:
    g = torch.Generator().manual_seed(3)

    def one() -> list[object]:
        return [
            torch.randn(5, 7, generator=g),
            torch.randint(0, 9, (3,), generator=g),
            torch.randn(4, generator=g),
            2.5,
        ]

    return Rotation.build(
        [one(), one()], [one()], [False, False, False, False], torch.device("cpu")
    )


def test_one_input_flag_is_up_exactly_when_an_input_changed() -> None:
    rot = _rotation()
    names = ["a", "idx", "state", "alpha"]
    outputs = {"state"}  # an input the definition also names as an output: the solution's
    for k in (0, 1):
        rot.refill(k)
        snap = rot.live_snapshot()
        assert snap is not None
        assert not bool(rot.input_flag(snap, k, names, outputs))
        assert not any(bool(f) for _, f in rot.input_changes(snap, k, names, outputs))
    rot.refill(1)
    rot.live_set[2].add_(1.0)  # the state: allowed
    snap = rot.live_snapshot()
    assert not bool(rot.input_flag(snap, 1, names, outputs))
    rot.live_set[1][0] += 1  # idx: not allowed
    snap = rot.live_snapshot()
    assert bool(rot.input_flag(snap, 1, names, outputs))
    changed = [n for n, f in rot.input_changes(snap, 1, names, outputs) if bool(f)]
    assert changed == ["idx"]
    # a snapshot compared with the other pool set differs in every random input
    assert bool(rot.input_flag(snap, 0, names, outputs))
    # nothing checked: every packed input is an output
    assert rot.input_flag(snap, 1, names, {"a", "idx", "state"}) is None
