#!/usr/bin/env python3
"""Write tests/fixtures/evaluators/{cases.json,tensors.safetensors}: table-driven correctness cases
whose expected verdicts come from flashinfer-bench's OWN evaluator classes, run on concrete tiny
tensors. fibtui's evaluators must reach the same verdicts (tests/test_evaluators.py).

Nothing of flashinfer-bench is copied here: the script imports it from the path given on the
command line, asks its registry (resolve_evaluator) which evaluator judges each definition and
calls that class's check_correctness on the case's inputs, reference outputs and a stub solution
(a real flashinfer_bench.compile.Runnable, value-returning). What this script computes itself is
only the cases: inputs, reference outputs (e.g. the top-k indexer's reference top-k) and the
wrong solutions.

It needs torch, pydantic, safetensors, pyyaml, docstring-parser and typing_extensions, and runs on
a CPU-only machine (see tests/fixtures/evaluators/README.md for the exact setup):

    python scripts/data/make_evaluator_cases.py --flashinfer-bench /tmp/fib-main --commit <40 hex>

Deterministic: fixed seeds, so rerunning it writes the same files.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import shutil
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "evaluators"


# ----------------------------------------------------------------------------- importing flashinfer-bench


def import_flashinfer_bench(path: str) -> types.SimpleNamespace:
    """Import the evaluator machinery from a flashinfer-bench source tree, on a CPU-only machine.

    Stubs and patches (all inside this process only; the evaluator logic stays the real one):
    - `flashinfer` (flashinfer.testing.bench_gpu_time_with_cupti, imported by bench/timing.py for
      timing): a GPU package that is not installed here; stubbed in sys.modules. The evaluators'
      check_correctness never times anything.
    - torch.cuda.synchronize: the evaluators call it after each solution call; a CPU build of
      torch has no CUDA, so it becomes a no-op.
    - flashinfer_bench.bench.utils.env_snapshot (called by make_eval): replaced by a fixed,
      harmless Environment so nothing depends on this machine.
    """
    sys.path.insert(0, str(Path(path).resolve()))
    import torch

    if "flashinfer" not in sys.modules:
        try:
            import flashinfer  # noqa: F401
        except ImportError:  # stub: GPU-only package, only its timing helper is imported
            flashinfer = types.ModuleType("flashinfer")
            flashinfer.__path__ = []  # type: ignore[attr-defined]
            testing = types.ModuleType("flashinfer.testing")

            def _no_gpu_timing(*_a: Any, **_k: Any) -> Any:
                raise RuntimeError("flashinfer is stubbed: no GPU timing in the fixture generator")

            testing.bench_gpu_time_with_cupti = _no_gpu_timing  # type: ignore[attr-defined]
            flashinfer.testing = testing  # type: ignore[attr-defined]
            sys.modules["flashinfer"] = flashinfer
            sys.modules["flashinfer.testing"] = testing

    torch.cuda.synchronize = lambda device=None: None  # CPU: nothing to wait for

    import flashinfer_bench.bench.utils as fib_bench_utils
    from flashinfer_bench.bench.config import ResolvedEvalConfig
    from flashinfer_bench.bench.evaluators import dsa_topk_indexer as fib_topk
    from flashinfer_bench.bench.evaluators import resolve_evaluator
    from flashinfer_bench.bench.evaluators import sampling as fib_sampling
    from flashinfer_bench.compile import Runnable, RunnableMetadata
    from flashinfer_bench.data import Definition, Environment

    fib_bench_utils.env_snapshot = lambda device: Environment(
        hardware="cpu_fixture_generator", libs={}
    )
    return types.SimpleNamespace(
        torch=torch,
        Definition=Definition,
        ResolvedEvalConfig=ResolvedEvalConfig,
        resolve_evaluator=resolve_evaluator,
        Runnable=Runnable,
        RunnableMetadata=RunnableMetadata,
        topk=fib_topk,
        sampling=fib_sampling,
    )


# ----------------------------------------------------------------------------- the table


class Cases:
    """Collects cases and their tensors; runs each through the official evaluator."""

    def __init__(self, fib: types.SimpleNamespace) -> None:
        self.fib = fib
        self.torch = fib.torch
        self.cases: list[dict[str, Any]] = []
        self.tensors: dict[str, Any] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="fib_eval_cases_"))

    def _put(self, key: str, t: Any) -> str:
        assert key not in self.tensors, key
        self.tensors[key] = t.detach().clone().contiguous()
        return key

    def add(
        self,
        name: str,
        definition: dict[str, Any],
        axes: dict[str, int],
        inputs: list[Any],
        reference: list[Any],
        solution: Any,
        *,
        atol: float = 1e-2,
        rtol: float = 1e-2,
        required_matched_ratio: float | None = None,
        extra: dict[str, Any] | None = None,
        sampler: dict[str, Any] | None = None,
        note: str = "",
    ) -> None:
        """solution: a list of tensors (returned as a tuple, or as the tensor itself when there is
        one), or None with `sampler` (a descriptor; see make_sampler)."""
        torch = self.torch
        assert re.fullmatch(r"[a-z0-9_]+", name), name
        assert all(c["name"] != name for c in self.cases), name
        defn = self.fib.Definition.model_validate(definition)
        evaluator = self.fib.resolve_evaluator(defn)
        cfg = self.fib.ResolvedEvalConfig(
            atol=atol,
            rtol=rtol,
            required_matched_ratio=required_matched_ratio,
            extra=dict(extra or {}),
            num_trials=1,
            warmup_runs=0,
            iterations=1,
            profile_baseline=False,
        )
        input_names = list(definition["inputs"])
        output_names = list(definition["outputs"])
        assert len(inputs) == len(input_names) and len(reference) == len(output_names), name
        in_entries = []
        for n, v in zip(input_names, inputs, strict=True):
            if isinstance(v, torch.Tensor):
                in_entries.append({"tensor": self._put(f"{name}/input/{n}", v)})
            else:
                in_entries.append({"scalar": v})
        ref_keys = [
            self._put(f"{name}/reference/{n}", r)
            for n, r in zip(output_names, reference, strict=True)
        ]

        if sampler is not None:
            fn = make_sampler(torch, sampler, definition)
            sol_entry: Any = {"sampler": sampler}
        else:
            sol = [t.detach().clone() for t in solution]
            sol_entry = [self._put(f"{name}/solution/{i}", t) for i, t in enumerate(solution)]

            def fn(*_args: Any, _sol: list[Any] = sol) -> Any:
                return tuple(_sol) if len(_sol) != 1 else _sol[0]

        runnable = self.fib.Runnable(
            fn,
            self.fib.RunnableMetadata(
                build_type="python",
                definition_name=defn.name,
                solution_name=name,
                destination_passing_style=False,
                definition=defn,
            ),
        )
        log_path = str(self.tmp / f"{name}.log")
        correctness, evaluation = evaluator.check_correctness(
            definition=defn,
            sol_runnable=runnable,
            inputs=[list(inputs)],
            ref_outputs=[list(reference)],
            cfg=cfg,
            log_path=log_path,
            device="cpu",
        )
        expected: dict[str, Any] = {
            "status": "PASSED" if evaluation is None else evaluation.status.value
        }
        if correctness is not None:
            expected["max_absolute_error"] = jnum(correctness.max_absolute_error)
            expected["max_relative_error"] = jnum(correctness.max_relative_error)
            expected["extra"] = jclean(dict(correctness.extra or {}))
        else:
            expected["max_absolute_error"] = None
            expected["max_relative_error"] = None
            expected["extra"] = {}
        if evaluation is not None and evaluation.log:
            expected["log"] = evaluation.log
        case = {
            "name": name,
            "evaluator": evaluator.__name__,
            "definition": definition,
            "axes": axes,
            "config": {
                "atol": atol,
                "rtol": rtol,
                "required_matched_ratio": required_matched_ratio,
                "extra": dict(extra or {}),
            },
            "inputs": in_entries,
            "reference": ref_keys,
            "solution": sol_entry,
            "expected": expected,
        }
        if note:
            case["note"] = note
        self.cases.append(case)


def jnum(v: Any) -> Any:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v


def jclean(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: jclean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jclean(x) for x in v]
    return jnum(v)


def definition_dict(
    name: str,
    op_type: str,
    axes: dict[str, Any],
    inputs: dict[str, Any],
    outputs: dict[str, Any],
    description: str = "",
) -> dict[str, Any]:
    """A plain FlashInfer-Trace definition. axes: name -> int (const) or None (var); tensors:
    name -> (shape list or None, dtype). The reference is a placeholder: never run here."""
    args = ", ".join(inputs)
    d: dict[str, Any] = {
        "name": name,
        "op_type": op_type,
        "axes": {
            a: ({"type": "var"} if v is None else {"type": "const", "value": v})
            for a, v in axes.items()
        },
        "inputs": {n: {"shape": s, "dtype": t} for n, (s, t) in inputs.items()},
        "outputs": {n: {"shape": s, "dtype": t} for n, (s, t) in outputs.items()},
        "reference": f"def run({args}):\n    raise NotImplementedError('fixture definition: never run')\n",
    }
    if description:
        d["description"] = description
    return d


# ----------------------------------------------------------------------------- sampling stubs


def make_sampler(
    torch: Any, desc: dict[str, Any], definition: dict[str, Any]
) -> Callable[..., Any]:
    """A sampling "solution" described by `desc` (the same descriptor tests/test_evaluators.py
    interprets). One torch.Generator seeded desc["seed"] (default 0) is made per case and drawn
    from on every call, in call order; each call draws torch.multinomial(weights, 1) once for all
    rows and returns int64 samples [rows]:
      {"kind": "constant", "value": v}       every sample is v
      {"kind": "out_of_vocab"}               every sample is vocab_size + 3
      {"kind": "multinomial", "from": ...}   weights per row:
          "uniform"        ones over the whole vocabulary
          "probs"          probs (ignores top_k / top_p)
          "masked_probs"   probs * mask, mask = tokens whose prob >= the row's top_k-th largest
                           (all tokens where top_k is not in (0, vocab))
          "skewed_masked"  mask * linspace(1, 0, vocab)**4 + mask * 1e-6 (right support, wrong
                           distribution)
    """
    gen = torch.Generator().manual_seed(int(desc.get("seed", 0)))
    names = list(definition["inputs"])
    kind, source = desc.get("kind"), desc.get("from")

    def top_k_mask(probs: Any, top_k: Any) -> Any:
        rows, vocab = probs.shape
        k = top_k.reshape(-1).long()
        if k.numel() == 1 and rows != 1:
            k = k.expand(rows)
        sorted_probs = probs.sort(dim=-1, descending=True).values
        pivot = sorted_probs.gather(1, (k - 1).clamp(0, vocab - 1).unsqueeze(1))
        active = ((k > 0) & (k < vocab)).unsqueeze(1)
        return torch.where(active, probs >= pivot, torch.ones_like(probs, dtype=torch.bool))

    def call(*args: Any) -> Any:
        probs = args[names.index("probs")]
        probs2 = probs.unsqueeze(0) if probs.dim() == 1 else probs
        rows, vocab = probs2.shape
        if kind == "constant":
            return torch.full((rows,), int(desc["value"]), dtype=torch.int64)
        if kind == "out_of_vocab":
            return torch.full((rows,), vocab + 3, dtype=torch.int64)
        assert kind == "multinomial", desc
        if source == "uniform":
            weights = torch.ones(rows, vocab)
        elif source == "probs":
            weights = probs2.float()
        else:
            assert source in ("masked_probs", "skewed_masked"), desc
            assert "top_k" in names and "top_p" not in names, "only top_k masks are implemented"
            mask = top_k_mask(probs2, args[names.index("top_k")])
            weights = probs2.float() * mask
            if source == "skewed_masked":
                weights = (
                    mask.float() * torch.linspace(1.0, 0.0, vocab).clamp(min=0.0) ** 4
                    + mask.float() * 1e-6
                )
        return torch.multinomial(weights, 1, generator=gen).reshape(rows)

    return call


# ----------------------------------------------------------------------------- default evaluator


def default_cases(c: Cases) -> None:
    torch = c.torch
    g = torch.Generator().manual_seed(1001)
    f32 = definition_dict(
        "tiny_elementwise",
        "elementwise",
        {"n": None, "d": 8},
        {"x": (["n", "d"], "float32"), "alpha": (None, "float32")},
        {"y": (["n", "d"], "float32")},
        "y = alpha * x (only the shapes matter: the reference is never run)",
    )
    bf16 = definition_dict(
        "tiny_elementwise_bf16",
        "elementwise",
        {"n": None, "d": 8},
        {"x": (["n", "d"], "bfloat16")},
        {"y": (["n", "d"], "bfloat16")},
    )
    two = definition_dict(
        "tiny_elementwise_two_out",
        "elementwise",
        {"n": None, "d": 8},
        {"x": (["n", "d"], "float32")},
        {"y": (["n", "d"], "float32"), "z": (["n", "d"], "bfloat16")},
    )

    n = 4
    x = torch.randn(n, 8, generator=g)
    alpha = 1.5
    y = alpha * x

    def f32_case(name: str, sol: Any, **kw: Any) -> None:
        c.add(name, f32, {"n": x.shape[0]}, [x, alpha], [y], [sol], **kw)

    f32_case("default_exact_match", y.clone())
    far = y.clone()
    far[1, 3] += 5.0
    f32_case("default_one_element_far_off", far)

    # tolerance edges (atol = rtol = 1e-2; an element fails only when abs > atol AND rel > rtol)
    small = torch.full((n, 8), 0.5)  # |ref| = 0.5: rel = 2 * abs
    big = torch.full((n, 8), 10.0)  # |ref| = 10: rel = abs / 10
    xs, xb = small / alpha, big / alpha
    c.add(
        "default_abs_just_inside_atol",
        f32,
        {"n": n},
        [xs, alpha],
        [small],
        [small + 0.009],
        note="every element off by 0.009: abs < atol though rel = 0.018 > rtol",
    )
    c.add(
        "default_abs_just_outside_atol",
        f32,
        {"n": n},
        [xs, alpha],
        [small],
        [torch.where(torch.arange(n * 8).reshape(n, 8) == 5, small + 0.011, small)],
        note="one element off by 0.011 on |ref| = 0.5: abs and rel both over",
    )
    c.add(
        "default_rel_just_inside_rtol",
        f32,
        {"n": n},
        [xb, alpha],
        [big],
        [big + 0.09],
        note="every element off by 0.09 on |ref| = 10: abs > atol though rel = 0.009 < rtol",
    )
    c.add(
        "default_rel_just_outside_rtol",
        f32,
        {"n": n},
        [xb, alpha],
        [big],
        [torch.where(torch.arange(n * 8).reshape(n, 8) == 7, big + 0.11, big)],
        note="one element off by 0.11 on |ref| = 10: rel = 0.011 > rtol and abs > atol",
    )

    nan = y.clone()
    nan[0, 0] = float("nan")
    f32_case("default_nan_in_output", nan)
    inf = y.clone()
    inf[2, 5] = float("inf")
    f32_case("default_posinf_in_output", inf)
    ninf = y.clone()
    ninf[3, 1] = float("-inf")
    f32_case("default_neginf_in_output", ninf)
    both = y.clone()
    both[0, 0] = float("nan")
    both[3, 7] = float("inf")
    f32_case("default_nan_and_inf_in_output", both, note="inf is checked before nan")
    ref_nan = y.clone()
    ref_nan[1, 1] = float("nan")
    sol_nan = y.clone()
    sol_nan[1, 1] = float("nan")
    c.add(
        "default_nan_in_both_same_place",
        f32,
        {"n": n},
        [x, alpha],
        [ref_nan],
        [sol_nan],
        note="a NaN in the solution fails even where the reference has the same NaN",
    )
    c.add(
        "default_nan_in_reference_only",
        f32,
        {"n": n},
        [x, alpha],
        [ref_nan],
        [y.clone()],
        note="NaN error compares false against the tolerances, and max(0.0, nan) keeps 0.0",
    )
    ref_inf = y.clone()
    ref_inf[1, 2] = float("inf")
    c.add(
        "default_inf_in_reference_only",
        f32,
        {"n": n},
        [x, alpha],
        [ref_inf],
        [y.clone()],
        note="abs error inf but rel error inf/inf = nan: the element does not count as failing",
    )

    f32_case("default_wrong_shape", y[:, :7].clone())
    f32_case("default_wrong_shape_transposed", y.t().contiguous())
    f32_case("default_wrong_dtype_float64", y.double())
    f32_case("default_wrong_dtype_bfloat16", y.to(torch.bfloat16))

    xb16 = torch.randn(n, 8, generator=g).to(torch.bfloat16)
    yb16 = (xb16.float() * 2.0).to(torch.bfloat16)
    c.add("default_bf16_exact_match", bf16, {"n": n}, [xb16], [yb16], [yb16.clone()])
    bf_off = yb16.clone()
    bf_off[0, 2] = bf_off[0, 2] + 3.0
    c.add("default_bf16_one_element_far_off", bf16, {"n": n}, [xb16], [yb16], [bf_off])
    c.add("default_bf16_wrong_dtype_float32", bf16, {"n": n}, [xb16], [yb16], [yb16.float()])

    # required_matched_ratio 0.9 on 200 elements (n=25, d=8): 10 or 30 of them far off
    n2 = 25
    x2 = torch.randn(n2, 8, generator=g)
    y2 = alpha * x2
    order = torch.randperm(n2 * 8, generator=g)
    for pct, label in ((5, "5pct"), (15, "15pct")):
        bad = order[: n2 * 8 * pct // 100]
        sol = y2.clone().reshape(-1)
        sol[bad] += 5.0
        c.add(
            f"default_ratio_0p9_{label}_off",
            f32,
            {"n": n2},
            [x2, alpha],
            [y2],
            [sol.reshape(n2, 8)],
            required_matched_ratio=0.9,
        )

    # two outputs
    z = (x * 0.5).to(torch.bfloat16)
    z_off = z.clone()
    z_off[2, 2] = z_off[2, 2] + 4.0
    c.add("default_two_outputs_both_right", two, {"n": n}, [x], [y, z], [y.clone(), z.clone()])
    c.add("default_two_outputs_second_wrong", two, {"n": n}, [x], [y, z], [y.clone(), z_off])
    c.add(
        "default_two_outputs_second_wrong_dtype", two, {"n": n}, [x], [y, z], [y.clone(), z.float()]
    )
    c.add(
        "default_two_outputs_only_one_returned",
        two,
        {"n": n},
        [x],
        [y, z],
        [y.clone()],
        note="normalize_result raises for a count mismatch: a runtime error",
    )


# ----------------------------------------------------------------------------- lowbit evaluator


def lowbit_cases(c: Cases) -> None:
    torch = c.torch
    g = torch.Generator().manual_seed(2002)
    defn = definition_dict(
        "moe_fp8_block_scale_tiny",
        "moe",
        {"seq_len": None, "hidden_size": 10},
        {
            "hidden_states": (["seq_len", "hidden_size"], "float8_e4m3fn"),
            "hidden_states_scale": (["seq_len"], "float32"),
        },
        {"output": (["seq_len", "hidden_size"], "bfloat16")},
        "named like the contest's MoE so the lowbit evaluator claims it (name contains moe_fp8_block_scale)",
    )
    t = 10  # 100 output elements
    hs = torch.randn(t, 10, generator=g).clamp(-2, 2).to(torch.float8_e4m3fn)
    scale = torch.rand(t, generator=g) + 0.5
    ref = (hs.float() * scale[:, None] * 4.0).to(torch.bfloat16)
    order = torch.randperm(t * 10, generator=g)

    def with_bad(count: int) -> Any:
        sol = (ref.float() * 1.1).reshape(-1)  # every element 10% off: inside rtol=0.3
        sol[order[:count]] += 8.0  # over atol=1 and (|ref| <= 8) over rtol=0.3
        return sol.reshape(t, 10).to(torch.bfloat16)

    kw = dict(atol=1.0, rtol=0.3)
    inputs = [hs, scale]
    axes = {"seq_len": t}
    c.add(
        "lowbit_default_ratio_96pct_matched",
        defn,
        axes,
        inputs,
        [ref],
        [with_bad(4)],
        **kw,
        note="required_matched_ratio None: the evaluator uses its DEFAULT_REQUIRED_MATCHED_RATIO",
    )
    c.add(
        "lowbit_default_ratio_95pct_matched_boundary",
        defn,
        axes,
        inputs,
        [ref],
        [with_bad(5)],
        **kw,
        note="matched ratio exactly at the default: fails only when matched < required",
    )
    c.add("lowbit_default_ratio_94pct_matched", defn, axes, inputs, [ref], [with_bad(6)], **kw)
    c.add(
        "lowbit_ratio_0p9_92pct_matched",
        defn,
        axes,
        inputs,
        [ref],
        [with_bad(8)],
        **kw,
        required_matched_ratio=0.9,
    )
    c.add(
        "lowbit_ratio_0p9_88pct_matched",
        defn,
        axes,
        inputs,
        [ref],
        [with_bad(12)],
        **kw,
        required_matched_ratio=0.9,
    )
    inf = ref.clone()
    inf[0, 0] = float("inf")
    c.add("lowbit_inf_in_output", defn, axes, inputs, [ref], [inf], **kw)
    c.add("lowbit_exact_match", defn, axes, inputs, [ref], [ref.clone()], **kw)


# ----------------------------------------------------------------------------- DSA top-k indexer


TOPK_PAGE, TOPK_K, TOPK_D, TOPK_H = 4, 8, 8, 2


def topk_definition() -> dict[str, Any]:
    return definition_dict(
        "dsa_topk_indexer_fp8_tiny",
        "dsa_paged",
        {
            "batch_size": None,
            "num_index_heads": TOPK_H,
            "index_head_dim": TOPK_D,
            "page_size": TOPK_PAGE,
            "topk": TOPK_K,
            "max_num_pages": None,
            "num_pages": None,
            "kv_cache_num_heads": 1,
            "head_dim_with_scale": TOPK_D + 4,
        },
        {
            "q_index_fp8": (["batch_size", "num_index_heads", "index_head_dim"], "float8_e4m3fn"),
            "k_index_cache_fp8": (
                ["num_pages", "page_size", "kv_cache_num_heads", "head_dim_with_scale"],
                "int8",
            ),
            "weights": (["batch_size", "num_index_heads"], "float32"),
            "seq_lens": (["batch_size"], "int32"),
            "block_table": (["batch_size", "max_num_pages"], "int32"),
        },
        {"topk_indices": (["batch_size", "topk"], "int32")},
        "k_index_cache_fp8 in the deep_gemm layout: per page, the fp8 bytes of its tokens, then one "
        "float32 scale per token; topk_indices are global token ids page * page_size + offset, -1 pads",
    )


def topk_cases(c: Cases) -> None:
    torch = c.torch
    ps, K, D, H = TOPK_PAGE, TOPK_K, TOPK_D, TOPK_H
    g = torch.Generator().manual_seed(3007)  # a seed whose row 0 has >= 12 tokens scoring above 1
    B, num_pages, max_pages = 3, 12, 4
    seq_lens = torch.tensor([14, 11, 5], dtype=torch.int32)
    block_table = (
        torch.randperm(num_pages, generator=g).to(torch.int32).reshape(B, max_pages)
    )  # disjoint rows
    q = torch.randn(B, H, D, generator=g).clamp(-2, 2).to(torch.float8_e4m3fn)
    weights = (
        torch.rand(B, H, generator=g) + 0.25
    ) * 10.0  # scores ~10: abs errors > atol where rel < rtol
    k_bf16 = torch.randn(num_pages, ps, 1, D, generator=g).to(torch.bfloat16)
    cache = c.fib.topk._pack_fp8_k_cache(k_bf16, ps, D)  # flashinfer-bench's own packer

    # views on the packed bytes: per page, ps*D fp8 bytes then ps float32 scales
    flat = cache.view(torch.uint8).view(num_pages, ps * (D + 4))

    def token_bytes(tok: int) -> Any:
        p, o = divmod(tok, ps)
        return flat[p, o * D : (o + 1) * D], flat[p, ps * D + 4 * o : ps * D + 4 * (o + 1)]

    def dequant() -> Any:
        fp8 = (
            flat[:, : ps * D].contiguous().view(torch.float8_e4m3fn).float().view(num_pages, ps, D)
        )
        scale = flat[:, ps * D :].contiguous().view(torch.float32).view(num_pages, ps)
        return fp8 * scale[:, :, None]

    def tokens_of(b: int) -> list[int]:
        return [int(block_table[b, i // ps]) * ps + i % ps for i in range(int(seq_lens[b]))]

    def scores(b: int) -> Any:
        k_tok = dequant().reshape(-1, D)[torch.tensor(tokens_of(b))]
        return (torch.relu(q[b].float() @ k_tok.T) * weights[b, :, None]).sum(0)

    # ties: in row 0 the tokens ranked 9th and 10th become byte copies of the 8th (= the last one
    # picked), so three tokens tie for the last slot
    s0 = scores(0)
    rank0 = [tokens_of(0)[i] for i in s0.argsort(descending=True).tolist()]
    assert float(s0.sort(descending=True).values[K + 3]) > 1.0, (
        "ties and the near tie must be above relu's zero"
    )
    kth = rank0[K - 1]
    for tok in rank0[K : K + 2]:
        for dst, src in zip(token_bytes(tok), token_bytes(kth), strict=True):
            dst.copy_(src)
    # near ties: the float32 scales of the 11th and 12th tokens are set so that their scores are
    # 0.995 x and 0.98 x the 8th's (a token's score is proportional to its scale)
    near, near_out = rank0[K + 2], rank0[K + 3]
    pos = {t: i for i, t in enumerate(tokens_of(0))}
    for tok, factor in ((near, 0.995), (near_out, 0.98)):
        s0 = scores(0)
        assert float(s0[pos[tok]]) > 0
        token_bytes(tok)[1].view(torch.float32).mul_(
            factor * float(s0[pos[kth]]) / float(s0[pos[tok]])
        )
    s0 = scores(0)
    assert float(s0[pos[rank0[K]]]) == float(s0[pos[kth]]) == float(s0[pos[rank0[K + 1]]])

    # the reference top-k, computed here: dequantize, relu(q @ K.T) * w summed over heads, top-k
    ref = torch.full((B, K), -1, dtype=torch.int32)
    for b in range(B):
        toks = torch.tensor(tokens_of(b))
        best = scores(b).topk(min(K, len(toks))).indices
        ref[b, : len(best)] = toks[best].to(torch.int32)
    chosen0 = ref[0].tolist()
    tied = [kth, rank0[K], rank0[K + 1]]
    assert sum(t in chosen0 for t in tied) == 1 and all(t in chosen0 for t in rank0[: K - 1])

    defn = topk_definition()
    axes = {"batch_size": B, "num_pages": num_pages, "max_num_pages": max_pages}
    inputs = [q, cache, weights, seq_lens, block_table]

    def add(name: str, sol: Any, **kw: Any) -> None:
        c.add(name, defn, axes, inputs, [ref], [sol], **kw)

    add("topk_reference_itself", ref.clone())
    perm = ref.clone()
    for b in range(B):
        valid = int((ref[b] >= 0).sum())
        perm[b, :valid] = ref[b, :valid][torch.randperm(valid, generator=g)]
    add("topk_permuted_rows", perm, note="the same set per row in another order")

    tie = ref.clone()
    picked = next(t for t in tied if t in chosen0)
    other = next(t for t in tied if t not in chosen0)
    tie[0, chosen0.index(picked)] = other
    add(
        "topk_tie_other_choice",
        tie,
        note="row 0: three tokens tie (byte copies) for the last slot; "
        "the solution picks another of them than the reference",
    )

    near_sol = ref.clone()
    near_sol[0, chosen0.index(picked)] = near
    add(
        "topk_near_tie_within_tolerance",
        near_sol,
        note="row 0: a token whose score is 0.995 x the last picked one's replaces it (abs > atol, rel 0.005 < rtol)",
    )
    near_out_sol = ref.clone()
    near_out_sol[0, chosen0.index(picked)] = near_out
    add(
        "topk_near_tie_outside_tolerance",
        near_out_sol,
        note="row 0: a token whose score is 0.98 x the last picked one's replaces it (abs > atol, rel 0.02 > rtol)",
    )

    dup = ref.clone()
    dup[0, 1] = dup[0, 0]
    add("topk_duplicate_index", dup)

    stranger = ref.clone()
    foreign_page = int(block_table[0, 0])  # a page of row 0, not in row 1's block table
    stranger[1, 2] = foreign_page * ps + 1
    add(
        "topk_page_not_in_block_table",
        stranger,
        note="row 1 names a token of a page only row 0's block_table has",
    )

    beyond = ref.clone()
    # row 1: seq_len 11, so slot 2 of its block table holds positions 8..11 and position 11 is past the end
    beyond_tok = int(block_table[1, 2]) * ps + 3
    assert beyond_tok not in tokens_of(1)
    beyond[1, 0] = beyond_tok
    add("topk_beyond_seq_len_in_reachable_page", beyond)
    unused_slot = ref.clone()
    unused_slot[2, 1] = int(block_table[2, 3]) * ps  # row 2 (seq_len 5) uses slots 0-1 only
    add(
        "topk_block_table_slot_past_seq_len",
        unused_slot,
        note="row 2 names a page its block_table lists in a slot past its seq_len",
    )

    worse = ref.clone()
    s1 = scores(1)
    toks1 = tokens_of(1)
    unpicked1 = [t for t in toks1 if t not in ref[1].tolist()]
    worst = min(unpicked1, key=lambda t: float(s1[toks1.index(t)]))
    best1 = max(ref[1].tolist(), key=lambda t: float(s1[toks1.index(t)]))
    worse[1, ref[1].tolist().index(best1)] = worst
    add(
        "topk_clearly_worse_token",
        worse,
        note="row 1: its best token replaced by its worst unpicked one",
    )

    padded = ref.clone()
    padded[0, 3] = -1
    add(
        "topk_padding_instead_of_a_token",
        padded,
        note="row 0 has 14 tokens but the solution pads one slot",
    )

    add("topk_wrong_dtype_int64", ref.to(torch.int64))
    add("topk_wrong_shape", ref[:, : K - 1].clone())

    # row 2 has seq_len 5 < topk 8: three -1 pads, here spread over other positions
    moved = ref.clone()
    valid2 = ref[2][ref[2] >= 0].tolist()
    assert len(valid2) == 5
    row = [-1] * K
    for slot, tok in zip((1, 2, 4, 6, 7), valid2, strict=True):
        row[slot] = tok
    moved[2] = torch.tensor(row, dtype=torch.int32)
    add(
        "topk_short_row_padding_moved",
        moved,
        note="row 2 (seq_len 5): the -1 pads sit in slots 0, 3 and 5",
    )


# ----------------------------------------------------------------------------- DSA sparse attention


def sparse_cases(c: Cases) -> None:
    torch = c.torch
    g = torch.Generator().manual_seed(4004)
    H, CKV, KPE, PS, TOPK = 2, 8, 4, 4, 4
    defn = definition_dict(
        "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
        "dsa_paged",
        {
            "num_tokens": None,
            "num_qo_heads": H,
            "head_dim_ckv": CKV,
            "head_dim_kpe": KPE,
            "page_size": PS,
            "topk": TOPK,
            "num_pages": None,
        },
        {
            "q_nope": (["num_tokens", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
            "q_pe": (["num_tokens", "num_qo_heads", "head_dim_kpe"], "bfloat16"),
            "ckv_cache": (["num_pages", "page_size", "head_dim_ckv"], "bfloat16"),
            "kpe_cache": (["num_pages", "page_size", "head_dim_kpe"], "bfloat16"),
            "sparse_indices": (["num_tokens", "topk"], "int32"),
            "sm_scale": (None, "float32"),
        },
        {
            "output": (["num_tokens", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
            "lse": (["num_tokens", "num_qo_heads"], "float32"),
        },
        "the contest definition's NAME (the evaluator matches exact names) with tiny const axes",
    )
    T, P = 3, 3
    q_nope = torch.randn(T, H, CKV, generator=g).to(torch.bfloat16)
    q_pe = torch.randn(T, H, KPE, generator=g).to(torch.bfloat16)
    ckv = torch.randn(P, PS, CKV, generator=g).to(torch.bfloat16)
    kpe = torch.randn(P, PS, KPE, generator=g).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(P * PS, generator=g)[:TOPK] for _ in range(T)]).to(
        torch.int32
    )
    idx[2, 3] = -1  # one padded slot
    sm_scale = 0.25
    # reference: softmax over the selected tokens; lse = natural-log logsumexp of the scaled logits
    out = torch.empty(T, H, CKV)
    lse = torch.empty(T, H)
    ckv_f, kpe_f = ckv.float().reshape(-1, CKV), kpe.float().reshape(-1, KPE)
    for t in range(T):
        sel = idx[t][idx[t] >= 0].long()
        logits = (q_nope[t].float() @ ckv_f[sel].T + q_pe[t].float() @ kpe_f[sel].T) * sm_scale
        lse[t] = torch.logsumexp(logits, dim=-1)
        out[t] = torch.softmax(logits, dim=-1) @ ckv_f[sel]
    out = out.to(torch.bfloat16)
    inputs = [q_nope, q_pe, ckv, kpe, idx, sm_scale]
    axes = {"num_tokens": T, "num_pages": P}

    def add(name: str, sol: list[Any], **kw: Any) -> None:
        c.add(name, defn, axes, inputs, [out, lse], sol, **kw)

    add("sparse_both_outputs_right", [out.clone(), lse.clone()])
    add("sparse_output_only", [out.clone()], note="value-returning, one tensor: lse is left out")
    out_off = out.clone()
    out_off[1, 0, 2] = out_off[1, 0, 2] + 1.0
    add(
        "sparse_output_only_wrong",
        [out_off],
        note="one tensor returned: it is still compared with output",
    )
    lse_off = lse.clone()
    lse_off[0, 1] += 0.5
    add("sparse_lse_off", [out.clone(), lse_off])
    lse_inf = lse.clone()
    lse_inf[2, 0] = float("inf")
    add("sparse_lse_inf", [out.clone(), lse_inf])
    add("sparse_three_outputs", [out.clone(), lse.clone(), torch.zeros((), dtype=torch.float32)])
    add("sparse_lse_alone", [lse.clone()], note="one tensor is always taken as output")
    add("sparse_no_outputs", [], note="an empty tuple")
    add("sparse_output_wrong_dtype", [out.float(), lse.clone()])


# ----------------------------------------------------------------------------- sampling


def sampling_cases(c: Cases, num_trials: int) -> None:
    torch = c.torch
    g = torch.Generator().manual_seed(5005)
    V, B = 16, 2
    defn = definition_dict(
        "top_k_sampling_tiny",
        "sampling",
        {"batch_size": None, "vocab_size": V},
        {"probs": (["batch_size", "vocab_size"], "float32"), "top_k": (["batch_size"], "int32")},
        {"samples": (["batch_size"], "int64")},
    )
    probs = torch.softmax(torch.randn(B, V, generator=g) * 1.5, dim=-1)
    top_k = torch.tensor([4, 6], dtype=torch.int32)
    inputs = [probs, top_k]
    # the reference outputs as SamplingEvaluator.build_baseline makes them, with its own helpers
    s = c.fib.sampling
    fdef = c.fib.Definition.model_validate(defn)
    mask = s._compute_valid_sampling_mask(
        probs, s._detect_thresholding_method(fdef), {"top_k": top_k}
    )
    masked = probs * mask.float()
    expected_probs = masked / masked.sum(dim=-1, keepdim=True)
    extra = {"sampling_validation_trials": 100, "sampling_tvd_threshold": 0.2}
    if num_trials != 500000:
        extra_note = f"distribution step sampled with num_trials={num_trials} (patched; the evaluator says 500000)"
    else:
        extra_note = ""

    ref_note = (
        "reference[0] is not samples: it is what SamplingEvaluator.build_baseline stores, the "
        "probs masked to top_k and renormalized [batch_size, vocab_size] float32"
    )

    def add(name: str, sampler: dict[str, Any], note: str = "") -> None:
        note = "; ".join(x for x in (note, ref_note, extra_note) if x)
        c.add(
            name,
            defn,
            {"batch_size": B},
            inputs,
            [expected_probs],
            None,
            sampler=sampler,
            extra=extra,
            note=note,
        )

    add("sampling_masked_probs_correct", {"kind": "multinomial", "from": "masked_probs", "seed": 7})
    add(
        "sampling_ignores_top_k",
        {"kind": "multinomial", "from": "probs", "seed": 7},
        note="samples from the full distribution: some fall outside the top-k mask",
    )
    add("sampling_uniform_over_vocab", {"kind": "multinomial", "from": "uniform", "seed": 7})
    add("sampling_out_of_vocab", {"kind": "out_of_vocab"})
    add(
        "sampling_skewed_in_mask",
        {"kind": "multinomial", "from": "skewed_masked", "seed": 7},
        note="the right support, a wrong distribution: the TVD decides",
    )
    top0 = int(probs[0].argmax())
    assert bool(mask[1, top0]), "the constant must sit inside both rows' masks"
    add(
        "sampling_constant_in_mask",
        {"kind": "constant", "value": top0},
        note="always the same token, inside both masks: the TVD decides",
    )


# ----------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--flashinfer-bench", required=True, help="root of a flashinfer-bench source tree"
    )
    ap.add_argument(
        "--commit", required=True, help="the 40-hex flashinfer-bench commit of that tree"
    )
    ap.add_argument(
        "--out", default=str(DEFAULT_OUT), help="output folder (default: tests/fixtures/evaluators)"
    )
    ap.add_argument(
        "--sampling-num-trials",
        type=int,
        default=500000,
        help="samples for SamplingEvaluator's distribution step (its own value: 500000)",
    )
    args = ap.parse_args()
    if not re.fullmatch(r"[0-9a-f]{40}", args.commit):
        ap.error("--commit must be 40 lowercase hex digits")

    fib = import_flashinfer_bench(args.flashinfer_bench)
    torch = fib.torch
    torch.manual_seed(0)
    torch.set_num_threads(1)  # no thread-count dependent reductions
    if args.sampling_num_trials != 500000:
        original = fib.sampling._sample_token_distributions

        def fewer(*a: Any, num_trials: int = 500000, **k: Any) -> Any:
            return original(*a, num_trials=args.sampling_num_trials, **k)

        fib.sampling._sample_token_distributions = fewer

    c = Cases(fib)
    default_cases(c)
    lowbit_cases(c)
    topk_cases(c)
    sparse_cases(c)
    sampling_cases(c, args.sampling_num_trials)

    from safetensors.torch import save_file

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = shlex.join(["python", "scripts/data/make_evaluator_cases.py", *sys.argv[1:]])
    doc = {
        "generated_by": {
            "flashinfer_bench_commit": args.commit,
            "command": command,
            "torch": torch.__version__,
        },
        "cases": c.cases,
    }
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    (out / "cases.json").write_text(text)
    save_file(
        dict(sorted(c.tensors.items())),
        str(out / "tensors.safetensors"),
        metadata={"flashinfer_bench_commit": args.commit},
    )
    (out / "tensors.safetensors").chmod(0o644)  # save_file makes it 0600
    shutil.rmtree(c.tmp, ignore_errors=True)

    print(f"{'case':48} {'evaluator':28} {'status':20} max_abs / max_rel / extra")
    for case in c.cases:
        e = case["expected"]
        extra = {k: v for k, v in e["extra"].items() if k != "tvds_per_batch"}
        print(
            f"{case['name']:48} {case['evaluator']:28} {e['status']:20} "
            f"{e['max_absolute_error']} / {e['max_relative_error']} / {extra or ''}"
        )
    size = (out / "tensors.safetensors").stat().st_size
    print(f"{len(c.cases)} cases, {len(c.tensors)} tensors ({size} bytes) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
