"""scripts/tune_moe.py writes what the kernels read: every MoEKernelConfig field survives its tables, and GEMM 1's
prefill candidates try the gate and up rows in one dot as well as in two (decode candidates: two)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from quickmoe.kernels.moe_configs import MoEKernelConfig

pytest.importorskip("triton")


def _script(name: str):
    """scripts/NAME.py, imported as a module."""
    path = Path(__file__).resolve().parents[2] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tuner():
    return _script("tune_moe")


def test_every_config_field_survives_the_written_table():
    tuner = _tuner()
    config = MoEKernelConfig(block_m=128, block_n=64, block_k=128, num_warps=8, num_stages=5, swap_ab=True,
                             group_m=3, gate_up_one_dot=True, split_k=3)  # every field away from its default ...
    for config in (config, dataclasses.replace(config, gate_up_one_dot=False, weight_tma=True)):  # ... TMA: two dots
        assert MoEKernelConfig(**json.loads(json.dumps(tuner._as_dict(config)))) == config


def test_prefill_candidates_try_one_dot_and_decode_candidates_do_not():
    tuner = _tuner()
    prefill = tuner.gemm1_candidates(128, quick=False)
    assert {c.gate_up_one_dot for c in prefill} == {False, True}
    assert len(prefill) == 2 * len({c for c in prefill if not c.gate_up_one_dot})
    assert not any(c.gate_up_one_dot for c in tuner.gemm1_candidates(16, quick=False))
    assert not any(c.gate_up_one_dot for c in tuner.gemm1_candidates(16, quick=True))


def test_k_in_parts_are_tried_at_decode_sizes_only():
    """Decode candidates get twins with K in parts where parts won (T <= 2 on the H200), and only there."""
    tuner = _tuner()
    decode = tuner.gemm2_candidates(8)
    assert {c.split_k for c in decode} == {1}
    one = tuner.with_parts(decode, tuner.SPLIT_MAX_TOKENS)
    assert len(one) == len(tuner.SPLIT_CANDIDATES) * len(decode)
    assert {dataclasses.replace(c, split_k=1) for c in one} == set(decode)
    assert {c.split_k for c in one} == set(tuner.SPLIT_CANDIDATES) and 2 in tuner.SPLIT_CANDIDATES
    assert tuner.with_parts(decode, tuner.SPLIT_MAX_TOKENS + 1) == decode


def test_a_candidate_whose_output_is_wrong_is_never_chosen(monkeypatch):
    """The tuner times candidates only after their output matched the fallback config's: a faster tile that
    computes garbage (as two FP8 decode tiles did on the H200) must not win, and one that fails to match at all
    must not leave an empty choice unexplained."""
    import torch

    tuner = _tuner()
    fast_wrong = MoEKernelConfig(block_m=16, block_n=32, num_warps=2)
    slow_right = MoEKernelConfig(block_m=16, block_n=64, num_warps=4)
    g = torch.Generator().manual_seed(7)
    reference = torch.randn(24, 40, generator=g)
    outputs = {fast_wrong: reference + torch.randn(24, 40, generator=g),  # off by about its own size
               slow_right: reference * (1 + 1e-4)}
    seconds = {fast_wrong: 1e-6, slow_right: 2e-6}
    timed_configs = []

    def fake_graph_seconds(fn, sets):
        fn(0)
        return seconds[timed_configs[-1]]

    def run(i, config):
        timed_configs.append(config)
        return outputs[config]

    monkeypatch.setattr(tuner, "graph_seconds", fake_graph_seconds)
    assert tuner.best_of([fast_wrong, slow_right], run, reference) == (2e-6, slow_right)
    assert tuner.best_of([fast_wrong, slow_right], run, None) == (1e-6, fast_wrong)  # no reference: time only
    # --span checks the input sets at both T: a tile right at T and wrong at the run's end loses
    at_end = torch.randn(24, 40, generator=g)
    by_set = {(fast_wrong, 0): reference, (fast_wrong, 7): at_end + torch.randn(24, 40, generator=g),
              (slow_right, 0): reference, (slow_right, 7): at_end}

    def run_by_set(i, config):
        timed_configs.append(config)
        return by_set[(config, i)]

    assert tuner.best_of([fast_wrong, slow_right], run_by_set, {0: reference, 7: at_end}) == (2e-6, slow_right)
    assert tuner.best_of([fast_wrong, slow_right], run_by_set, {0: reference}) == (1e-6, fast_wrong)
    outputs[slow_right] = torch.full_like(reference, float("nan"))
    with pytest.raises(RuntimeError, match="matched the fallback"):
        tuner.best_of([fast_wrong, slow_right], run, reference)


def test_the_small_grid_is_small_and_fp8_steps_one_scale_group():
    """Every candidate compiles a kernel, so the default grid stays within a device call; FP8 K steps are its
    128-column scale groups whatever the grid says (the kernel forces them), so no candidate is timed twice."""
    tuner = _tuner()
    for fmt in ("mxfp4", "nvfp4", "fp8", "bf16"):
        for block_m in (8, 16, 128):
            ones = tuner.gemm1_candidates(block_m, fmt), tuner.gemm2_candidates(block_m, fmt)
            for candidates in ones:
                assert 1 <= len(candidates) <= 12 and len(set(candidates)) == len(candidates)
                if fmt == "fp8":
                    assert {c.block_k for c in candidates} == {128}
                # prefill tiles of unpacked weights also try TMA weight tiles, never with one dot in GEMM 1
                tma = {c for c in candidates if c.weight_tma}
                assert bool(tma) == (block_m > 32 and fmt in ("fp8", "bf16"))
                assert not any(c.gate_up_one_dot for c in tma)
                assert {dataclasses.replace(c, weight_tma=False) for c in tma} <= set(candidates)
    assert len(tuner.gemm1_candidates(16, "mxfp4", grid="full")) == 48  # the original grid is still reachable
    for quick in (False, True):  # 8-row tiles: transposed only, the plain orientation's points folded into it
        eight = tuner.gemm1_candidates(8, "mxfp4", quick=quick) + tuner.gemm2_candidates(8, "mxfp4", quick=quick)
        assert eight and all(c.swap_ab and c.block_m == 8 for c in eight)
    assert tuner.block_m_candidates(1, 4, 32) == [8, 16]  # gpt-oss-20b's batch-1 decode
    assert tuner.block_m_candidates(256, 4, 32) == [16, 32, 64]
    # register-operand experts: a 32-row tile joins from 4 rows an expert (gpt-oss-120b at T = 128 and 256)
    assert tuner.block_m_candidates(256, 4, 128) == [8, 16]
    assert tuner.block_m_candidates(256, 4, 128, register=True) == [8, 16, 32]
    assert tuner.block_m_candidates(128, 4, 128, register=True) == [8, 16, 32]
    assert tuner.block_m_candidates(64, 4, 128, register=True) == [8, 16]
    assert tuner.block_m_candidates(256, 4, 32, register=True) == [16, 32, 64]


def test_the_tile_option_takes_eight_rows_and_names_a_bad_tile(monkeypatch, capsys):
    """`--block-m 8,16` is a valid request (8-row tiles are tried in the transposed orientation); a tile that is no
    power of two is refused before any GPU work, naming the option."""
    tuner = _tuner()
    monkeypatch.setattr("sys.argv", ["tune_moe.py", "--shapes", "gpt-oss-20b", "--tokens", "1,2", "--block-m", "8,16"])
    args = tuner._parse_args()
    assert args.block_m == [8, 16] and args.tokens == [1, 2]
    assert args.span  # each key over its range by default (Mixtral NVFP4's H200 key 65: see `span_end`)
    monkeypatch.setattr("sys.argv", ["tune_moe.py", "--shapes", "gpt-oss-20b", "--no-span"])
    assert not tuner._parse_args().span
    monkeypatch.setattr("sys.argv", ["tune_moe.py", "--shapes", "gpt-oss-20b", "--block-m", "12"])
    with pytest.raises(SystemExit):
        tuner._parse_args()
    assert "--block-m" in capsys.readouterr().err


def test_nvfp4_candidates_leave_out_the_unreliable_tiles():
    """The tuner never tries NVFP4's transposed 4-warp tiles of 64+ rows (`moe_configs.nvfp4_tile_unreliable`: NaN /
    inf in some runs on the H200), yet still tries both orientations and both warp counts there; MXFP4 keeps them."""
    from quickmoe.kernels.moe_configs import nvfp4_tile_unreliable

    tuner = _tuner()
    for block_m in (64, 128, 256):
        for grid in ("small", "full"):
            nv = (tuner.gemm1_candidates(block_m, "nvfp4", grid=grid)
                  + tuner.gemm2_candidates(block_m, "nvfp4", grid=grid))
            assert nv and not any(nvfp4_tile_unreliable(c) for c in nv)
        small = tuner.gemm1_candidates(block_m, "nvfp4") + tuner.gemm2_candidates(block_m, "nvfp4")
        assert {c.swap_ab for c in small} == {False, True} and {c.num_warps for c in small} == {4, 8}
        mx = tuner.gemm1_candidates(block_m, "mxfp4") + tuner.gemm2_candidates(block_m, "mxfp4")
        assert any(nvfp4_tile_unreliable(c) for c in mx)
    assert not any(nvfp4_tile_unreliable(c) for c in tuner.gemm1_candidates(16, "nvfp4"))  # decode tiles: < 64 rows


def test_a_register_operand_twin_replaces_the_winner_only_where_it_runs_and_is_faster(monkeypatch):
    """A winner gets its `register_operand` twin timed, kept when faster (the winner's Triton tile stays in the entry
    as its fall-back), only where the engine would run the register kernels (`register_problems`, from the engine's
    own check, on a Hopper GPU: stubbed here) and K is in one part: gpt-oss-20b's MXFP4 experts at tiles of 8-64
    rows, and gpt-oss at TP = 2 (1,440 intermediate columns a rank: a ragged last gate/up group and K = 1,440 for
    GEMM 2, which the kernels take since 2026-11-30); not at 128 rows, not NVFP4 or bf16 experts, where the twin
    would decline and only noise could pick it."""
    import torch

    import quickmoe.kernels.moe_gemm_register as register
    from quickmoe.bench.moe_experts import SHAPES, MoEShape, make_experts

    if register.gluon is None:
        pytest.skip("a triton with Gluon")
    monkeypatch.setattr(register, "_hopper", lambda device: True)
    tuner = _tuner()
    winner = MoEKernelConfig(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=3)
    reference = torch.randn(8, 8, generator=torch.Generator().manual_seed(3))
    timed = []

    def fake_best_of(candidates, run, ref):  # the two-step twin the faster of the two
        timed.append(candidates)
        return (twin_seconds, candidates[-1])

    monkeypatch.setattr(tuner, "best_of", fake_best_of)
    g = torch.Generator().manual_seed(4)
    small = dict(hidden=256, inter=128, experts=4, top_k=2)  # gpt-oss's layout at a size the CPU makes quickly
    mxfp4 = make_experts(MoEShape(**small, activation="swiglu_gpt_oss"), "mxfp4", torch.device("cpu"), g)
    for block_m in (8, 16, 32, 64):
        assert tuner.register_problems(mxfp4, block_m) == ("", "")
    twins = [dataclasses.replace(winner, register_operand=True),  # one K step a stage at the winner's stages, two at 2
             dataclasses.replace(winner, register_operand=True, steps_per_stage=2, num_stages=2)]
    for twin_seconds, expected in ((1e-6, twins[1]), (3e-6, winner)):
        got = tuner.register_twin((2e-6, winner), None, reference, tuner.register_problems(mxfp4, 64)[0])
        assert got == (min(twin_seconds, 2e-6), expected)
    assert timed == [twins] * 2
    twin_seconds = 1e-6
    ragged = make_experts(MoEShape(hidden=256, inter=96, experts=4, top_k=2, activation="swiglu_gpt_oss"), "mxfp4",
                          torch.device("cpu"), g)  # as gpt-oss at TP = 2: 1,440 = 22.5 x 64
    nvfp4 = make_experts(MoEShape(**small, activation="silu"), "nvfp4", torch.device("cpu"), g)
    assert tuner.register_problems(ragged, 32) == ("", "")
    declined = [tuner.register_problems(mxfp4, 128), tuner.register_problems(nvfp4, 32)]
    assert all(p1 and p2 for p1, p2 in declined), declined
    for problem in [p for pair in declined for p in pair]:
        assert tuner.register_twin((2e-6, winner), None, reference, problem) == (2e-6, winner)
    assert tuner.register_twin((2e-6, dataclasses.replace(winner, split_k=2)), None, reference, "") == (
        2e-6, dataclasses.replace(winner, split_k=2))
    assert len(timed) == 2
    assert SHAPES["gpt-oss-120b-tp2"].inter == 1440 and SHAPES["gpt-oss-20b-tp2"].inter == 1440


def test_the_pair_in_use_is_written_where_no_candidate_beats_it(monkeypatch, tmp_path):
    """Each T's winner is compared with the pair the engine read at T before the run (its files' nearest entries:
    Qwen3 FP8's T = 256 took key 65 until 2026-12-03): a slower winner is not written (the small grid's bf16 winner
    for Qwen3 at T = 256 was 5% slower than what was in use), nor one faster by at most `--min-gain` (2%: such gains
    did not show in the model), a faster one is."""
    import torch

    tuner = _tuner()
    from quickmoe.kernels.moe_configs import config_file_name, moe_kernel_config

    middle = MoEKernelConfig(block_m=64, block_n=128, block_k=128, num_warps=8, num_stages=3, group_m=8,
                             gate_up_one_dot=True)
    prefill = MoEKernelConfig(block_m=128, block_n=64, block_k=128, num_warps=4, num_stages=3, group_m=8)
    for n, k, proj in ((1536, 2048, "gate_up"), (2048, 768, "down")):
        (tmp_path / config_file_name(128, n, k, "fp8", "CPU-test", proj)).write_text(json.dumps(
            {"65": tuner._as_dict(middle), "1024": tuner._as_dict(prefill)}))
    assert tuner.in_use_pair("qwen3-30b-a3b", "fp8", "CPU-test", None, tmp_path, 256) == (middle, middle)
    assert tuner.in_use_pair("qwen3-30b-a3b", "fp8", "CPU-test", None, tmp_path, 900) == (prefill, prefill)
    assert tuner.in_use_pair("qwen3-30b-a3b", "fp8", "other GPU", None, tmp_path, 256) == (
        moe_kernel_config(128, 1536, 2048, "fp8", "other GPU", 256, tmp_path, None, proj="gate_up"),) * 2

    tuned = MoEKernelConfig(block_m=32, block_n=64, block_k=128, num_warps=4, num_stages=3)
    seen = []

    def fake_tune_tokens(ex, top_k, tokens, g, *, grid, quick, block_ms, in_use, span_end):
        assert span_end is None  # without --span
        seen.append((tokens, in_use))
        # T = 256: the pair in use faster; T = 128: the winner; T = 192: the winner 1% faster (under --min-gain);
        # T = 320: the fallback faster than the winner, which beat the pair in use (Mixtral bf16 at T = 128 on the
        # H200, 2026-12-03 seventh session)
        used_seconds = {256: 1.0e-4, 128: 3.0e-4, 192: 2.02e-4, 320: 3.0e-4}[tokens]
        fallback_seconds = (0.9e-4, 0.9e-4) if tokens == 320 else (5e-4, 5e-4)
        return ((2.0e-4, 1.2e-4, 0.8e-4, tuned, tuned), fallback_seconds,
                (used_seconds, used_seconds / 2, used_seconds / 2, *in_use), None)

    monkeypatch.setattr(tuner, "tune_tokens", fake_tune_tokens)
    monkeypatch.setattr(tuner.moe_configs, "CONFIG_DIR", tmp_path)  # the engine's files; --out is elsewhere, empty
    monkeypatch.setattr(tuner, "make_experts", lambda spec, fmt, device, g: None)
    out = tmp_path / "out"
    out.mkdir()
    args = argparse_namespace(tokens=[128, 256, 192, 320], out=str(out), grid="small", quick=False, block_m=None,
                              format="fp8", min_gain=tuner.MIN_GAIN, span=False)
    tuner.tune_shape("qwen3-30b-a3b", args, torch.device("cpu"), "CPU-test")
    # the engine's files, read before anything was written
    assert seen == [(128, (middle, middle)), (256, (middle, middle)), (192, (middle, middle)),
                    (320, (middle, middle))]
    for n, k, proj in ((1536, 2048, "gate_up"), (2048, 768, "down")):
        table = json.loads((out / config_file_name(128, n, k, "fp8", "CPU-test", proj)).read_text())
        assert MoEKernelConfig(**table["256"]) == middle and MoEKernelConfig(**table["128"]) == tuned
        assert MoEKernelConfig(**table["192"]) == middle
        assert MoEKernelConfig(**table["320"]) == tuner.moe_configs._fallback(320) != tuned
        assert set(table) == {"128", "192", "256", "320"}
    assert tuner.pick((2.0, 1.0, 1.0, tuned, tuned), None)[3] == tuned
    assert tuner.MIN_GAIN == 0.02
    assert tuner.pick((2.0, 1.0, 1.0, tuned, tuned), (2.05, 1.0, 1.05, middle, middle), 0.02)[3] == tuned
    assert tuner.pick((2.0, 1.0, 1.0, tuned, tuned), (2.03, 1.0, 1.03, middle, middle), 0.0)[3] == tuned
    assert tuner.pick((2.0, 1.0, 1.0, tuned, tuned), (2.01, 1.0, 1.01, middle, middle), 0.0)[3] == tuned
    assert tuner.pick((2.0, 1.0, 1.0, tuned, tuned), (2.01, 1.0, 1.01, middle, middle), 0.02)[3] == middle


def argparse_namespace(**kw):
    import argparse

    return argparse.Namespace(**kw)


def test_span_end_is_the_last_t_that_reads_the_key():
    """`span_end` against a naive loop over T with `moe_kernel_config`'s rule (the nearest key, ties to the smaller),
    on random tables; Mixtral NVFP4's H200 key 65 serves T = 65-72 (key 80 next)."""
    import random

    tuner = _tuner()
    rng = random.Random(11)
    for _ in range(200):
        keys = sorted(rng.sample(range(1, 300), rng.randint(1, 8)))
        for key in keys:
            readers = [t for t in range(1, 700) if min(keys, key=lambda k: (abs(k - t), k)) == key]
            want = max(readers) if readers and key != keys[-1] and max(readers) > key else None
            assert tuner.span_end(key, keys) == want, (keys, key)
    assert tuner.span_end(65, [1, 16, 64, 80, 128]) == 72  # the key joins the table's keys
    assert tuner.span_end(64, [1, 16, 64, 65, 80]) is None and tuner.span_end(8192, [1024, 8192]) is None


def test_span_tunes_over_both_ends_of_the_key(monkeypatch, tmp_path):
    """With --span, `tune_shape` hands `tune_tokens` the last T of each key (the engine's file's keys and the tuned
    ones), and `make_inputs` draws half the input sets at T and half there; without it, every set at T. On the GPU
    where there is one (the quantizer's CPU tensors failed there, 2026-12-04 fourth session)."""
    import torch

    from quickmoe.bench.moe_experts import MoEShape, make_experts

    tuner = _tuner()
    from quickmoe.kernels.moe_configs import config_file_name

    config = MoEKernelConfig(block_m=64, block_n=128, block_k=128, num_warps=8, num_stages=3, group_m=8)
    for n, k, proj in ((1536, 2048, "gate_up"), (2048, 768, "down")):
        (tmp_path / config_file_name(128, n, k, "fp8", "CPU-test", proj)).write_text(json.dumps(
            {"65": tuner._as_dict(config), "1024": tuner._as_dict(config)}))
    ends = {}

    def fake_tune_tokens(ex, top_k, tokens, g, *, grid, quick, block_ms, in_use, span_end):
        ends[tokens] = span_end
        return (2e-4, 1e-4, 1e-4, config, config), (5e-4, 5e-4), None, None

    monkeypatch.setattr(tuner, "tune_tokens", fake_tune_tokens)
    monkeypatch.setattr(tuner.moe_configs, "CONFIG_DIR", tmp_path)
    monkeypatch.setattr(tuner, "make_experts", lambda spec, fmt, device, g: None)
    for span, want in ((True, {128: 192, 256: 640, 1024: None}), (False, {128: None, 256: None, 1024: None})):
        args = argparse_namespace(tokens=[128, 256, 1024], out=str(tmp_path / "out"), grid="small", quick=False,
                                  block_m=None, format="fp8", min_gain=tuner.MIN_GAIN, span=span)
        (tmp_path / "out").mkdir(exist_ok=True)
        tuner.tune_shape("qwen3-30b-a3b", args, torch.device("cpu"), "CPU-test")
        assert ends == want

    g = torch.Generator().manual_seed(3)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # FP8 activations: a Triton quantizer
    ex = make_experts(MoEShape(hidden=256, inter=128, experts=4, top_k=2, activation="silu"), "fp8", device, g)
    xs, routes, inter = tuner.make_inputs(ex, 2, 5, g, span_end=9)
    half = tuner.SETS // 2
    assert [x.shape[0] for x, _ in xs] == [5] * half + [9] * (tuner.SETS - half)
    assert [ids.shape for _, ids in routes] == [(5, 2)] * half + [(9, 2)] * (tuner.SETS - half)
    assert [a.shape[0] for a, _ in inter] == [10] * half + [18] * (tuner.SETS - half)
    xs, _, _ = tuner.make_inputs(ex, 2, 5, g)
    assert [x.shape[0] for x, _ in xs] == [5] * tuner.SETS


def test_tune_tokens_times_the_pair_in_use_on_its_own_alignment(monkeypatch):
    """`tune_tokens` runs the pair in use through the same checks and timing as the candidates (the CUDA-graph timing
    replaced by one timed call), on an alignment of its own GEMM 1 tile. On the GPU where there is one, else in
    Triton's interpreter (CPU tensors reach a compiled kernel as bad pointers: this failed on the H200, 2026-12-04)."""
    import time

    import torch

    from quickmoe.bench.moe_experts import MoEShape, make_experts

    tuner = _tuner()
    aligned = []
    real_align = tuner.moe_align

    def recording_align(ids, experts, block_m):
        aligned.append(block_m)
        return real_align(ids, experts, block_m)

    monkeypatch.setattr(tuner, "moe_align", recording_align)
    def one_call_seconds(fn, sets):
        start = time.perf_counter()
        fn(0)
        return time.perf_counter() - start

    monkeypatch.setattr(tuner, "graph_seconds", one_call_seconds)
    g = torch.Generator().manual_seed(5)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ex = make_experts(MoEShape(hidden=256, inter=128, experts=4, top_k=2, activation="silu"), "fp8", device, g)
    in_use = (MoEKernelConfig(block_m=8, block_n=32, block_k=128, num_warps=2, num_stages=3, swap_ab=True),
              MoEKernelConfig(block_m=8, block_n=64, block_k=128, num_warps=2, num_stages=3, swap_ab=True))
    best, fallback, used, ends = tuner.tune_tokens(ex, 2, 4, g, quick=True, block_ms=[16], in_use=in_use)
    assert used is not None and used[3:] == in_use and used[0] == pytest.approx(used[1] + used[2]) and used[0] > 0
    assert ends is None  # without span_end
    assert best[3].block_m == 16 and aligned[-tuner.SETS:] == [8] * tuner.SETS

    # a tile none of whose candidates runs (Mixtral bf16's 256 rows at T = 512 on the H200: too much shared memory)
    # is left out; the others still win; with no tile left, the error names T and the tiles
    real_best_of = tuner.best_of

    def no_32_row_tile(candidates, run, reference=None):
        if candidates[0].block_m == 32:
            raise RuntimeError(f"no candidate of {len(candidates)} ran and matched the fallback config's output")
        return real_best_of(candidates, run, reference)

    monkeypatch.setattr(tuner, "best_of", no_32_row_tile)
    best, _, _, _ = tuner.tune_tokens(ex, 2, 4, g, quick=True, block_ms=[32, 16])
    assert best[3].block_m == 16 and best[4].block_m == 16
    with pytest.raises(RuntimeError, match=r"T=4: no tile of \[32\] had a candidate"):
        tuner.tune_tokens(ex, 2, 4, g, quick=True, block_ms=[32])


def test_untuned_runs_are_the_ts_that_read_entries_equal_to_the_fallback(tmp_path):
    """scripts/untuned_moe_keys.py: the runs of T whose nearest key holds its own fallback config, checked against
    moe_kernel_config's choice at every T; a shape with no table is untuned at every T."""
    from quickmoe.kernels.moe_configs import _fallback, config_file_name, moe_kernel_config

    script = _script("untuned_moe_keys")
    tuned = MoEKernelConfig(block_m=8, block_n=32, block_k=128, num_warps=2, num_stages=4, swap_ab=True)
    # key 1500 starts at T = 815, where the fallback's own choice is another tile than key 1500's
    table = {1: tuned, 24: _fallback(24), 64: _fallback(64), 65: _fallback(65), 128: tuned, 1500: _fallback(1500)}
    name = config_file_name(8, 64, 32, "fp8", "test GPU", "gate_up")
    (tmp_path / name).write_text(json.dumps({str(t): dataclasses.asdict(c) for t, c in table.items()}))
    runs = script.untuned_runs(8, 64, 32, "fp8", "test GPU", "gate_up", 2000, tmp_path)
    assert runs == [(13, 44, 24), (45, 64, 64), (65, 96, 65), (815, 2000, 1500)]
    flagged = {t for a, b, _ in runs for t in range(a, b + 1)}
    for t in range(1, 2001):  # a T is flagged exactly where it reads an entry equal to its key's fallback
        read = moe_kernel_config(8, 64, 32, "fp8", "test GPU", t, tmp_path, proj="gate_up")
        assert (t in flagged) == (read != tuned), t
    assert script.untuned_runs(8, 64, 32, "fp8", "test GPU", "down", 500, tmp_path) == [(1, 500, None)]
    # GEMM 2 ignores the one dot, and the FP8 files were first filled with the fallback's tiles on 8 warps
    down = {1: tuned, 65: dataclasses.replace(_fallback(65), gate_up_one_dot=False, num_warps=8),
            128: dataclasses.replace(_fallback(128), block_n=64)}
    name = config_file_name(8, 32, 32, "fp8", "test GPU", "down")
    (tmp_path / name).write_text(json.dumps({str(t): dataclasses.asdict(c) for t, c in down.items()}))
    assert script.untuned_runs(8, 32, 32, "fp8", "test GPU", "down", 500, tmp_path) == [(34, 96, 65)]
    assert script.untuned_runs(8, 64, 32, "fp8", "test GPU", "gate_up", 50, tmp_path) == [(13, 44, 24), (45, 50, 64)]


def test_outgrown_runs_are_the_keys_whose_run_ends_in_more_tiles_an_expert(tmp_path):
    """scripts/untuned_moe_keys.py --outgrown: a key is listed where an expert's mean rows fit its entry's tile at
    the key and not at the last T that reads it (moe_kernel_config's choice, checked at every T). Mixtral NVFP4's
    H200 key 65 as it was (16-row tiles, T = 65-72, 8 experts top-2: 16.2 -> 18 rows) is not: its mean was past the
    tile at the key already."""
    from quickmoe.kernels.moe_configs import config_file_name, moe_kernel_config

    script = _script("untuned_moe_keys")
    tile = {m: MoEKernelConfig(block_m=m, block_n=32, block_k=128, num_warps=2, num_stages=3, swap_ab=m < 16)
            for m in (8, 16, 32, 64, 128)}
    table = {1: tile[8], 16: tile[8], 64: tile[16], 65: tile[16], 80: tile[32], 256: tile[64], 512: tile[128]}
    name = config_file_name(8, 64, 32, "nvfp4", "test GPU", "gate_up")
    (tmp_path / name).write_text(json.dumps({str(t): dataclasses.asdict(c) for t, c in table.items()}))
    runs = script.outgrown_runs(8, 2, 64, 32, "nvfp4", "test GPU", "gate_up", 700, tmp_path)
    want = []
    readers = {}
    for t in range(1, 701):  # the naive loop: which key each T reads, then each key's last reader
        key = min(table, key=lambda k: (abs(k - t), k))
        assert moe_kernel_config(8, 64, 32, "nvfp4", "test GPU", t, tmp_path, proj="gate_up") == table[key]
        readers.setdefault(key, []).append(t)
    for key, ts in sorted(readers.items()):
        rows = [t * 2 / min(8, t * 2) for t in (key, ts[-1])]
        if rows[0] <= table[key].block_m < rows[1]:
            want.append((ts[0], ts[-1], key, table[key].block_m))
    assert runs == want and (9, 40, 16, 8) in runs and (385, 700, 512, 128) in runs  # 128 -> 175 rows (cut at 700)
    assert all(r[2] not in (1, 64, 65) for r in runs)  # key 64's run ends at 64; key 65's 16.2 rows are past 16
    assert script.outgrown_runs(8, 2, 64, 32, "nvfp4", "test GPU", "down", 700, tmp_path) == []  # no table
    assert script.tokens_to_tune([r[:3] for r in runs]) == sorted({r[2] for r in runs} | {
        1 << i for a, b, _, _ in runs for i in range(11) if a <= 1 << i <= b})


def test_the_tokens_to_tune_cover_each_untuned_run():
    """Each run's key, and the powers of two inside the run; a shape with no table gets every power of two up to the
    largest size."""
    script = _script("untuned_moe_keys")
    assert script.tokens_to_tune([(13, 44, 24), (45, 64, 64), (65, 96, 65), (815, 2000, 1500)]) == [
        16, 24, 32, 64, 65, 1024, 1500]
    assert script.tokens_to_tune([(1, 100, None)]) == [1, 2, 4, 8, 16, 32, 64]
    assert script.tokens_to_tune([(3073, 4000, 4096)]) == [4096]  # a run cut by --max-tokens: its key still
    assert script.tokens_to_tune([]) == []


def test_span_times_the_finalists_at_each_end_apart(monkeypatch):
    """With span_end, `tune_tokens` times the winner, the fallback pair and the pair in use over the input sets at T
    (the first half) and over those at span_end (the second half) apart: a stand-in timing that charges 1 for a set at
    T and 3 for one at span_end must read 2 and 6 for each pair (two GEMMs); a timing of both from the first half (a
    planted slip) reads 2 and 2."""
    import statistics

    import torch

    from quickmoe.bench.moe_experts import MoEShape, make_experts

    tuner = _tuner()
    half = tuner.SETS // 2
    seen: list[int] = []
    out = torch.linspace(1.0, 2.0, 12)

    def fake_gemm_runs(ex, top_k, inputs, aligns):
        assert [x.shape[0] for x, _ in inputs[0]] == [5] * half + [9] * (tuner.SETS - half)

        def run(i, config):
            seen.append(i)
            return out
        return run, run

    def charged_seconds(fn, sets):
        seen.clear()
        for i in range(sets):
            fn(i)
        return statistics.mean(1.0 if i < half else 3.0 for i in seen)

    monkeypatch.setattr(tuner, "gemm_runs", fake_gemm_runs)
    monkeypatch.setattr(tuner, "moe_align", lambda ids, experts, block_m: None)
    monkeypatch.setattr(tuner, "graph_seconds", charged_seconds)
    g = torch.Generator().manual_seed(7)
    ex = make_experts(MoEShape(hidden=256, inter=128, experts=4, top_k=2, activation="silu"), "bf16",
                      torch.device("cpu"), g)
    in_use = (MoEKernelConfig(block_m=16, block_n=32, block_k=64, num_warps=2, num_stages=3),) * 2
    best, _, used, ends = tuner.tune_tokens(ex, 2, 5, g, quick=True, block_ms=[16], in_use=in_use, span_end=9)
    fallback = tuner.moe_configs._fallback(5)
    assert set(ends) == {best[3:], (fallback, fallback), in_use}
    assert all(times == (2.0, 6.0) for times in ends.values()), ends


def test_a_span_winner_slower_at_the_key_itself_is_not_written(monkeypatch, tmp_path, capsys):
    """`guard_key`: a winner over the mean of T and the key's last T that is more than 1% slower than the pair in use
    at T itself is not written (Qwen3 NVFP4's key 256 on the H200: 7% faster on the mean, its 256-sequence decode step
    2.4-3.6% slower); one within 1% is. Through `tune_shape` with `tune_tokens` stubbed: T = 256's winner is 10% slower
    at T and 31% faster at its last T, so the pair in use is written and the line says why; T = 128's is 0.5% slower
    at T, so it is written."""
    import torch

    tuner = _tuner()
    from quickmoe.kernels.moe_configs import config_file_name

    middle = MoEKernelConfig(block_m=16, block_n=32, block_k=256, num_warps=2, num_stages=3, swap_ab=True)
    tuned = MoEKernelConfig(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=3, group_m=8)
    for n, k, proj in ((1536, 2048, "gate_up"), (2048, 768, "down")):
        (tmp_path / config_file_name(128, n, k, "nvfp4", "CPU-test", proj)).write_text(json.dumps(
            {"128": tuner._as_dict(middle), "1024": tuner._as_dict(tuned)}))

    def fake_tune_tokens(ex, top_k, tokens, g, *, grid, quick, block_ms, in_use, span_end):
        assert span_end is not None and in_use == (middle, middle)
        won_at_t = {256: 1.1e-4, 128: 1.005e-4}[tokens]
        ends = {(tuned, tuned): (won_at_t, 0.9e-4), in_use: (1.0e-4, 1.3e-4)}
        return ((2.0e-4, 1.2e-4, 0.8e-4, tuned, tuned), (5e-4, 5e-4), (2.3e-4, 1.2e-4, 1.1e-4, *in_use), ends)

    monkeypatch.setattr(tuner, "tune_tokens", fake_tune_tokens)
    monkeypatch.setattr(tuner.moe_configs, "CONFIG_DIR", tmp_path)
    monkeypatch.setattr(tuner, "make_experts", lambda spec, fmt, device, g: None)
    out = tmp_path / "out"
    out.mkdir()
    args = argparse_namespace(tokens=[256, 128], out=str(out), grid="small", quick=False, block_m=None,
                              format="nvfp4", min_gain=tuner.MIN_GAIN, span=True)
    tuner.tune_shape("qwen3-30b-a3b", args, torch.device("cpu"), "CPU-test")
    for n, k, proj in ((1536, 2048, "gate_up"), (2048, 768, "down")):
        table = json.loads((out / config_file_name(128, n, k, "nvfp4", "CPU-test", proj)).read_text())
        assert MoEKernelConfig(**table["256"]) == middle and MoEKernelConfig(**table["128"]) == tuned
    printed = capsys.readouterr().out
    line = next(text for text in printed.splitlines() if "T=256: gemm1" in text)
    assert "10.0% slower at T itself and 30.8% faster" in line and "in use at T / T=" in line

    chosen = (2.0, 1.0, 1.0, tuned, tuned)
    used = (2.3, 1.2, 1.1, middle, middle)
    ends = {(tuned, tuned): (1.0, 0.8), (middle, middle): (0.98, 1.5)}
    kept, why = tuner.guard_key(chosen, used, ends)  # 2.0% slower at T: over the 1% tolerance
    assert kept == used and "2.0% slower at T itself and 46.7% faster" in why
    assert tuner.guard_key(chosen, used, ends, tolerance=0.03) == (chosen, "")
    ends[(middle, middle)] = (0.995, 1.5)
    assert tuner.guard_key(chosen, used, ends) == (chosen, "")
    assert tuner.guard_key(chosen, None, ends) == (chosen, "") and tuner.guard_key(chosen, used, None) == (chosen, "")
    assert tuner.guard_key(used, used, ends) == (used, "")
