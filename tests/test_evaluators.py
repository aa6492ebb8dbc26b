"""The evaluators judge as flashinfer-bench's do (issue 16).

Table-driven: tests/fixtures/evaluators/cases.json holds tensors and the verdict flashinfer-bench's
own evaluator classes (main branch; the commit is in the file) gave on them
(scripts/data/make_evaluator_cases.py made it). fibtui's evaluator for the same definition must pick the
same evaluator and reach the same status, with the same error numbers. Plus the registry, the input
preparation and the structured inputs, on the CPU.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip(
    "torch", reason="the gpu extra (torch) is not installed: the worker cannot run here"
)

from fibtui.core.presets import (  # noqa: E402
    EVALUATOR_CLASSES,
    EVALUATORS,
    EvaluatorConflict,
    evaluator_for,
    preset_for,
)
from fibtui.worker import evaluators, structured  # noqa: E402
from fibtui.worker.check import Tolerance  # noqa: E402
from fibtui.worker.evaluators.dsa_topk_indexer import pack_k_cache, unpack_k_cache  # noqa: E402
from fibtui.worker.inputs import InputMaker, read_safetensors  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "evaluators"
CASES = FIXTURES / "cases.json"


def _cases() -> list[dict]:
    # committed with the tests: a missing file is a failure of its own, never a skip
    assert CASES.is_file(), f"{CASES} is missing (scripts/data/make_evaluator_cases.py writes it)"
    return json.loads(CASES.read_text())["cases"]


def _number(v):
    return float(v) if isinstance(v, str) else v


def _tensor(key: str):
    return read_safetensors(FIXTURES / "tensors.safetensors", key)


def _sampler(desc: dict, inputs: list, definition: dict):
    """The sampling solutions the cases describe (the same stubs the generator gave flashinfer-bench)."""
    from fibtui.worker.evaluators.sampling import thresholding, valid_mask

    gen = torch.Generator().manual_seed(int(desc.get("seed", 0)))
    names = list(definition["inputs"])
    # the weights depend on the inputs alone, and the evaluator calls the sampler many times with
    # the same input objects (its 100 trials, then its batches): computed once per input list,
    # not once per call (valid_mask over a 10,000-row batch took 95% of the test's time)
    known: list[tuple[list, torch.Tensor]] = []

    def weights_for(args: list, probs2: torch.Tensor) -> torch.Tensor:
        for seen, weights in known:
            if len(seen) == len(args) and all(a is b for a, b in zip(seen, args, strict=True)):
                return weights
        rows, vocab = probs2.shape
        source = desc.get("from")
        if source == "uniform":
            weights = torch.ones(rows, vocab)
        elif source == "probs":
            weights = probs2.float()
        else:
            params = {n: args[names.index(n)] for n in ("top_k", "top_p") if n in names}
            mask = valid_mask(probs2, thresholding(definition["name"]), params)
            weights = probs2.float() * mask
            if source == "skewed_masked":
                weights = (
                    mask.float() * torch.linspace(1.0, 0.0, vocab).clamp(min=0.0) ** 4
                    + mask.float() * 1e-6
                )
        known.append((list(args), weights))
        return weights

    def call(args: list):
        probs = args[names.index("probs")]
        probs2 = probs.unsqueeze(0) if probs.dim() == 1 else probs
        rows, vocab = probs2.shape
        kind = desc.get("kind")
        if kind == "constant":
            return [torch.full((rows,), int(desc["value"]), dtype=torch.int64)]
        if kind == "out_of_vocab":
            return [torch.full((rows,), vocab + 3, dtype=torch.int64)]
        weights = weights_for(args, probs2)
        return [torch.multinomial(weights, 1, generator=gen).reshape(rows)]

    return call


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_each_case_gets_the_official_verdict(case: dict) -> None:
    definition = case["definition"]
    expected = case["expected"]
    assert evaluator_for(definition) == EVALUATOR_CLASSES[case["evaluator"]], (
        "another evaluator would judge it"
    )
    ev = evaluators.for_definition(definition)
    cfg = case.get("config") or {}
    tol = Tolerance(
        cfg.get("atol", 1e-2),
        cfg.get("rtol", 1e-2),
        cfg.get("required_matched_ratio"),
        dict(cfg.get("extra") or {}),
    )
    inputs = [_tensor(i["tensor"]) if "tensor" in i else i["scalar"] for i in case["inputs"]]
    references = [_tensor(k) for k in case["reference"]]
    names = list(definition["outputs"])
    dtypes = [r.dtype for r in references]
    if isinstance(case["solution"], dict):  # a sampler, called as often as the evaluator wants
        call = _sampler(case["solution"]["sampler"], inputs, definition)
        outputs = call(inputs)
    else:
        call = None
        raw = [_tensor(k) for k in case["solution"]]
        try:
            outputs = ev.normalize(
                tuple(raw) if len(raw) != 1 else raw[0], names, dtypes, torch.device("cpu")
            )
        except ValueError:
            assert expected["status"] == "RUNTIME_ERROR", (
                "fibtui refused a result the official evaluator took"
            )
            return
    verdict = ev.judge(
        evaluators.Judging(definition, names, inputs, outputs, references, tol, call=call)
    )
    assert verdict.status == (expected["status"] or "PASSED"), verdict.detail
    for ours, theirs in (
        (verdict.max_abs_error, expected.get("max_absolute_error")),
        (verdict.max_rel_error, expected.get("max_relative_error")),
    ):
        theirs = _number(theirs)
        if theirs is None or ours is None:
            continue
        if math.isnan(theirs):
            assert math.isnan(ours)
        elif math.isinf(theirs):
            assert ours == theirs
        elif verdict.status != "PASSED" and case["evaluator"] == "SamplingEvaluator":
            continue  # sampled frequencies: the statistic, not the exact number, is the verdict
        else:
            assert ours == pytest.approx(theirs, rel=1e-5, abs=1e-6)
    extra = expected.get("extra") or {}
    if "matched_ratio" in extra and verdict.matched_ratio is not None:
        assert verdict.matched_ratio == pytest.approx(_number(extra["matched_ratio"]), abs=1e-6)
    if "tvd" in extra:
        assert (verdict.extra["tvd"] > 0.2) == (_number(extra["tvd"]) > 0.2)


def test_the_committed_cases_cover_what_the_issue_names() -> None:
    cases = _cases()
    assert len(cases) >= 60
    by = {(c["evaluator"], c["expected"]["status"] or "PASSED") for c in cases}
    for needed in [
        ("DsaTopkIndexerEvaluator", "PASSED"),
        ("DsaTopkIndexerEvaluator", "INCORRECT_NUMERICAL"),
        ("DefaultEvaluator", "PASSED"),
        ("DefaultEvaluator", "INCORRECT_NUMERICAL"),
        ("LowBitEvaluator", "PASSED"),
        ("SamplingEvaluator", "PASSED"),
        ("SamplingEvaluator", "INCORRECT_NUMERICAL"),
        ("DsaSparseAttentionEvaluator", "PASSED"),
    ]:
        assert needed in by, needed
    names = " ".join(c["name"] for c in cases)
    for word in ("permut", "dup", "tie", "block_table"):
        assert word in names or word.replace("_", "") in names, word


# ------------------------------------------------------------------ the registry


@pytest.mark.parametrize(
    ("name", "op_type", "expected"),
    [
        ("gdn_decode_qk4_v8_d128_k_last", "gdn", "default"),
        ("gdn_prefill_qk4_v8_d128_k_last", "gdn", "default"),
        ("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", "moe", "lowbit"),
        ("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", "dsa_paged", "dsa_topk_indexer"),
        (
            "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
            "dsa_paged",
            "dsa_sparse_attention",
        ),
        (
            "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps32",
            "dsa_paged",
            "default",
        ),  # exact names only
        ("top_k_sampling_from_probs_v128", "sampling", "sampling"),
    ],
)
def test_the_registry_picks_as_flashinfer_bench_does(
    name: str, op_type: str, expected: str
) -> None:
    definition = {"name": name, "op_type": op_type}
    assert evaluator_for(definition) == expected and preset_for(definition).evaluator == expected
    assert evaluators.for_definition(definition).name == expected
    assert expected in EVALUATORS


def test_two_claims_are_refused_like_the_official_registry() -> None:
    with pytest.raises(EvaluatorConflict, match="several evaluators"):
        evaluator_for({"name": "moe_fp8_block_scale_x", "op_type": "sampling"})


def test_the_preset_table_says_how_each_contest_definition_is_judged() -> None:
    moe = preset_for(
        {"name": "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", "op_type": "moe"}
    )
    assert (moe.atol, moe.rtol, moe.required_ratio, moe.evaluator) == (1.0, 0.3, 0.9, "lowbit")
    assert "--required-matched-ratio" in moe.parity_flags and "lowbit evaluator" in moe.describe()
    plain_lowbit = preset_for({"name": "xmoe_fp8_block_scale_gemm", "op_type": "gemm"})
    assert plain_lowbit.matched_ratio is None and plain_lowbit.required_ratio == 0.95
    prefill = preset_for(
        {"name": "gdn_prefill_qk4_v8_d128_k_last", "op_type": "gdn", "tags": ["stage:prefill"]}
    )
    assert prefill.parity_flags == ("--warmup-runs", "1", "--iterations", "5", "--num-trials", "3")
    assert prefill.to_json()["required_ratio"] == 1.0


# ------------------------------------------------------------------ the top-k indexer by hand


def _indexer_definition(page_size=4, topk=8):
    return {
        "name": "dsa_topk_indexer_fp8_tiny",
        "op_type": "dsa_paged",
        "axes": {
            "batch_size": {"type": "var"},
            "num_index_heads": {"type": "const", "value": 2},
            "index_head_dim": {"type": "const", "value": 8},
            "page_size": {"type": "const", "value": page_size},
            "topk": {"type": "const", "value": topk},
            "max_num_pages": {"type": "var"},
            "num_pages": {"type": "var"},
            "kv_cache_num_heads": {"type": "const", "value": 1},
            "head_dim_with_scale": {"type": "const", "value": 12},
        },
        "inputs": {
            "q_index_fp8": {
                "shape": ["batch_size", "num_index_heads", "index_head_dim"],
                "dtype": "float8_e4m3fn",
            },
            "k_index_cache_fp8": {
                "shape": ["num_pages", "page_size", "kv_cache_num_heads", "head_dim_with_scale"],
                "dtype": "int8",
            },
            "weights": {"shape": ["batch_size", "num_index_heads"], "dtype": "float32"},
            "seq_lens": {"shape": ["batch_size"], "dtype": "int32"},
            "block_table": {"shape": ["batch_size", "max_num_pages"], "dtype": "int32"},
        },
        "outputs": {"topk_indices": {"shape": ["batch_size", "topk"], "dtype": "int32"}},
    }


def _indexer_reference(inputs, page_size=4, topk=8):
    from fibtui.worker.evaluators.dsa_topk_indexer import scores_at

    q, cache, w, lens, table = inputs
    k_all = unpack_k_cache(cache)
    out = torch.full((q.shape[0], topk), -1, dtype=torch.int32)
    for b in range(q.shape[0]):
        n = int(lens[b])
        tokens = torch.tensor(
            [int(table[b, i // page_size]) * page_size + i % page_size for i in range(n)]
        )
        s = scores_at(tokens.unsqueeze(0), k_all, q[b : b + 1], w[b : b + 1], page_size)[0]
        best = s.topk(min(topk, n)).indices
        out[b, : len(best)] = tokens[best].int()
    return out


def _indexer_inputs(seed=0):
    definition = _indexer_definition()
    maker = InputMaker(
        definition, "cpu", None, evaluators.for_definition(definition).prepare_inputs
    )
    workload = {
        "uuid": "w",
        "axes": {"batch_size": 3, "max_num_pages": 4, "num_pages": 9},
        "inputs": {},
    }
    return definition, maker.make(workload, seed), maker


def test_the_indexer_inputs_are_consistent_and_the_cache_is_packed() -> None:
    definition, inputs, maker = _indexer_inputs()
    q, cache, w, lens, table = inputs
    assert set(maker.filled) == {"seq_lens", "block_table"}
    assert cache.dtype == torch.int8 and cache.shape == (9, 4, 1, 12)
    assert all(
        len(set(row.tolist())) == 4 and 0 <= int(row.min()) and int(row.max()) < 9 for row in table
    )
    assert all(1 <= int(n) <= 16 for n in lens)
    k = unpack_k_cache(cache)
    assert torch.isfinite(k).all() and float(k.abs().max()) > 0
    again = pack_k_cache(k.unsqueeze(2).to(torch.bfloat16))
    assert torch.allclose(unpack_k_cache(again), k, rtol=0.07, atol=1e-3)


def test_the_indexer_judges_the_set_not_the_order() -> None:
    definition, inputs, _ = _indexer_inputs()
    ev = evaluators.for_definition(definition)
    ref = _indexer_reference(inputs)
    names = ["topk_indices"]

    def judge(out):
        return ev.judge(evaluators.Judging(definition, names, inputs, [out], [ref], Tolerance()))

    assert judge(ref.clone()).status == "PASSED"
    shuffled = ref.clone()
    for b in range(ref.shape[0]):
        valid = int((ref[b] >= 0).sum())
        shuffled[b, :valid] = ref[b, :valid][
            torch.randperm(valid, generator=torch.Generator().manual_seed(b))
        ]
    assert judge(shuffled).status == "PASSED"
    dup = ref.clone()
    dup[0, 1] = dup[0, 0]
    v = judge(dup)
    assert (
        v.status == "INCORRECT_NUMERICAL" and "repeated" in v.detail and v.max_abs_error == math.inf
    )
    table = inputs[4]
    stranger = next(p for p in range(9) if p not in table[0].tolist())
    bad = ref.clone()
    bad[0, 0] = stranger * 4
    assert "outside their sequence" in judge(bad).detail
    assert judge(ref.to(torch.int64)).status == "INCORRECT_DTYPE"
    assert judge(ref[:, :4]).status == "INCORRECT_SHAPE"


# ------------------------------------------------------------------ structured inputs


def test_cu_seqlens_split_the_token_axis() -> None:
    definition = {
        "name": "gdn_prefill_tiny",
        "op_type": "gdn",
        "axes": {
            "total_seq_len": {"type": "var"},
            "num_seqs": {"type": "var"},
            "len_cu_seqlens": {"type": "var"},
            "h": {"type": "const", "value": 2},
        },
        "inputs": {
            "q": {"shape": ["total_seq_len", "h"], "dtype": "float32"},
            "cu_seqlens": {"shape": ["len_cu_seqlens"], "dtype": "int64"},
        },
        "outputs": {"o": {"shape": ["total_seq_len", "h"], "dtype": "float32"}},
    }
    maker = InputMaker(definition, "cpu", None)
    for seed in range(5):
        wl = {
            "uuid": f"p{seed}",
            "axes": {"total_seq_len": 37, "num_seqs": 5, "len_cu_seqlens": 6},
            "inputs": {},
        }
        cu = maker.make(wl, seed)[1]
        assert maker.filled == ["cu_seqlens"] and cu.dtype == torch.int64
        assert int(cu[0]) == 0 and int(cu[-1]) == 37 and bool((cu.diff() > 0).all())
    # a safetensors or scalar input is never touched; the same seed gives the same values
    a = maker.make(
        {"uuid": "p", "axes": {"total_seq_len": 9, "num_seqs": 3, "len_cu_seqlens": 4}}, 7
    )[1]
    b = maker.make(
        {"uuid": "p", "axes": {"total_seq_len": 9, "num_seqs": 3, "len_cu_seqlens": 4}}, 7
    )[1]
    assert torch.equal(a, b)


def test_sparse_indices_stay_inside_the_cache_and_no_row_is_all_padding() -> None:
    definition = {
        "name": "dsa_sparse_attention_tiny",
        "op_type": "dsa_paged",
        "axes": {
            "num_tokens": {"type": "var"},
            "num_pages": {"type": "var"},
            "page_size": {"type": "const", "value": 4},
            "topk": {"type": "const", "value": 6},
            "d": {"type": "const", "value": 8},
        },
        "inputs": {
            "ckv_cache": {"shape": ["num_pages", "page_size", "d"], "dtype": "bfloat16"},
            "sparse_indices": {"shape": ["num_tokens", "topk"], "dtype": "int32"},
        },
        "outputs": {"o": {"shape": ["num_tokens", "d"], "dtype": "bfloat16"}},
    }
    maker = InputMaker(definition, "cpu", None)
    idx = maker.make({"uuid": "s", "axes": {"num_tokens": 9, "num_pages": 5}}, 3)[1]
    assert idx.dtype == torch.int32 and idx.shape == (9, 6)
    assert int(idx.max()) < 20 and int(idx.min()) >= -1
    for row in idx:
        valid = row[row >= 0].tolist()
        assert valid and len(set(valid)) == len(valid)


def test_fp8_block_scales_are_positive() -> None:
    definition = {
        "name": "moe_fp8_block_scale_tiny",
        "op_type": "moe",
        "axes": {
            "t": {"type": "var"},
            "h": {"type": "const", "value": 4},
            "b": {"type": "const", "value": 2},
        },
        "inputs": {
            "hidden_states": {"shape": ["t", "h"], "dtype": "float8_e4m3fn"},
            "hidden_states_scale": {"shape": ["b", "t"], "dtype": "float32"},
            "bias": {"shape": ["h"], "dtype": "float32"},
        },
        "outputs": {"o": {"shape": ["t", "h"], "dtype": "bfloat16"}},
    }
    maker = InputMaker(definition, "cpu", None)
    hs, scale, bias = maker.make({"uuid": "m", "axes": {"t": 16}}, 1)
    assert maker.filled == ["hidden_states_scale"] and bool((scale > 0).all())
    assert bool((bias < 0).any())  # a plain float input stays random


def test_structured_fill_leaves_given_inputs_alone() -> None:
    definition = _indexer_definition()
    workload = {
        "uuid": "w",
        "axes": {"batch_size": 2, "max_num_pages": 4, "num_pages": 9},
        "inputs": {"seq_lens": {"type": "safetensors", "path": "x", "tensor_key": "y"}},
    }
    inputs = [
        torch.zeros(2, 2, 8),
        torch.zeros(9, 4, 1, 12, dtype=torch.int8),
        torch.zeros(2, 2),
        torch.full((2,), 5, dtype=torch.int32),
        torch.zeros(2, 4, dtype=torch.int32),
    ]
    filled = structured.fill(
        definition,
        workload,
        inputs,
        workload["axes"] | {"page_size": 4},
        torch.Generator().manual_seed(0),
    )
    assert filled == ["block_table"] and inputs[3].tolist() == [5, 5]
