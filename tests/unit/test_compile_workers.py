"""Kernels compiled ahead in worker processes (executor/compile_workers.py, compile_pool.py, kernel_precompile.py), on
the CPU for an sm_90 target: a launch's request, recorded by the precompile's JIT cache hook as Triton's JIT makes
it, compiled by a worker, lands in the kernel cache under the exact key `triton.compile` computes from the JIT's own
objects (the key the later launch looks up). Failures are reported, not raised. The launches themselves (recording on
a GPU, no compile left after the precompile) are tested on the GPU (tests/models/test_kernel_precompile.py).

The scenario runs in a process of its own without TRITON_INTERPRET (set for the other tests): compiling needs the
kernels as JIT functions, as a GPU process has them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

SCENARIO = textwrap.dedent('''
    import hashlib, json, sys, time, types
    import torch, triton
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.cache import get_cache_key, get_cache_manager
    from triton.runtime.jit import JITFunction, compute_cache_key, create_function_from_signature
    from pathlib import Path

    from quickmoe.executor.compile_pool import CompilePool
    from quickmoe.executor.compile_workers import KernelRequest, is_cached
    from quickmoe.executor.kernel_precompile import LaunchRecorder
    from quickmoe.kernels import rms_norm as rms

    TARGET = GPUTarget("cuda", 90, 32)

    def launch_as_the_jit_does(fn, args, kwargs, recorder):
        # JITFunction.run up to its cache hook (binder, _pack_args, _call_hook), for sm_90 instead of the device
        kwargs = dict(kwargs, debug=kwargs.get("debug", fn.debug) or triton.knobs.runtime.debug,
                      instrumentation_mode=triton.knobs.compilation.instrumentation_mode)
        backend = make_backend(TARGET)
        binder = create_function_from_signature(fn.signature, fn.params, backend)
        bound_args, specialization, options = binder(*args, **kwargs)
        key = compute_cache_key({}, specialization, options)
        options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, options)
        stopped = fn._call_hook(recorder, key, signature, 0, constexprs, options, [attrs], False)
        src = ASTSource(fn, signature, constexprs, attrs)
        # the metadata file triton.compile(src, target, options.__dict__) looks up first
        opts = backend.parse_options(dict(options.__dict__, **src.parse_options()))
        digest = hashlib.sha256(get_cache_key(src, backend, opts, get_cache_invalidating_env_vars()).encode())
        return stopped, Path(get_cache_manager(digest.hexdigest()).cache_dir) / f"{src.name}.json"

    def rms_launch(rows, hidden, residual, pdl):
        x, res = torch.randn(rows, hidden, dtype=torch.bfloat16), torch.randn(rows, hidden, dtype=torch.bfloat16)
        w = torch.randn(hidden, dtype=torch.bfloat16)
        out, summed = torch.empty_like(x), torch.empty_like(x)
        args = (x, res if residual else x, w, out, summed, out, out, x.stride(0), res.stride(0) if residual else 0,
                hidden, 1e-5)
        block = triton.next_power_of_2(hidden)
        return args, dict(HAS_RESIDUAL=residual, PARTS=0, BLOCK=block, FP8_OUT=False, HW_ROUND=False, EARLY=False,
                          PDL=pdl, num_warps=rms._num_warps(block))

    recorder = LaunchRecorder(TARGET)
    entries = []
    for rows, hidden, residual, pdl in [(3, 2880, True, True), (5, 2880, True, True), (7, 2880, True, True),
                                        (3, 250, False, False), (2, 96, True, False)]:
        stopped, entry = launch_as_the_jit_does(rms._rms_norm_kernel, *rms_launch(rows, hidden, residual, pdl),
                                                recorder)
        entries.append((stopped, str(entry)))

    # the same kernel as another library's: compiled and run as usual
    raw = rms._rms_norm_kernel.fn
    body = types.FunctionType(raw.__code__, raw.__globals__, raw.__name__, raw.__defaults__, raw.__closure__)
    body.__module__ = "somebody_else"
    foreign_stopped, _ = launch_as_the_jit_does(JITFunction(body), *rms_launch(3, 2880, True, True), recorder)

    requests = list(recorder.requests.values())
    first = requests[0]
    stale = KernelRequest(first.module, first.qualname, "not-its-source", first.spec, first.target)
    missing = KernelRequest(first.module, "_no_such_kernel", first.fn_key, first.spec, first.target)
    before = [is_cached(r) for r in requests]
    existed = [Path(e).exists() for _, e in entries]
    with CompilePool(2, launchers=False) as pool:
        results = pool.run([*requests, stale, missing])
    with CompilePool(1, launchers=False) as pool:
        again = pool.run(requests[:1])

    # the precompile's way: each new specialization handed on as the launch records it
    seen = []
    streaming = LaunchRecorder(TARGET, on_new=seen.append)
    for rows, hidden, residual, pdl in [(3, 2880, True, True), (5, 2880, True, True), (3, 250, False, False)]:
        launch_as_the_jit_does(rms._rms_norm_kernel, *rms_launch(rows, hidden, residual, pdl), streaming)
    with CompilePool(2, launchers=False) as pool:
        stream = pool.stream(priority=lambda r: 0 if r.qualname == "_no_such_kernel" else 1)
        for r in (stale, requests[0], missing):  # one at a time while the workers run
            stream.submit(r)
            time.sleep(0.05)
        streamed = stream.finish()
    with CompilePool(2, launchers=False) as pool:  # a worker dead before any request: the other takes them all
        pool.workers[0].kill()
        pool.workers[0].wait()
        stream = pool.stream()
        for r in requests:
            stream.submit(r)
        one_dead = stream.finish()
    with CompilePool(1, launchers=False) as pool:  # no live worker: each request fails, none is lost
        pool.workers[0].kill()
        pool.workers[0].wait()
        stream = pool.stream()
        for r in requests:
            stream.submit(r)
        all_dead = stream.finish()
    print(json.dumps({
        "seen": [[r.qualname, r.spec == requests[i].spec] for i, r in enumerate(seen)],
        "streamed": [[r.request.qualname, r.error, r.cached] for r in streamed],
        "one_dead": [[r.request == requests[i], r.error, r.cached] for i, r in enumerate(one_dead)],
        "all_dead": [[r.request == requests[i], r.error] for i, r in enumerate(all_dead)],
        "entries": entries, "existed": existed, "exist_after": [Path(e).exists() for _, e in entries],
        "foreign_stopped": foreign_stopped, "requests": [[r.module, r.qualname, list(r.target)] for r in requests],
        "json_names": [json.loads(Path(e).read_text())["name"] for _, e in entries if Path(e).exists()],
        "cached_before": before, "cached_after": [is_cached(r) for r in requests],
        "results": [[r.error, r.cached] for r in results], "again": [[r.error, r.cached] for r in again],
        "same_order": [r.request for r in results] == [*requests, stale, missing]}))
''')


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    cache = tmp_path_factory.mktemp("triton-cache")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(cache)
    proc = subprocess.run([sys.executable, "-c", SCENARIO, str(cache)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_recorder_stops_quickmoe_launches_and_keeps_one_request_per_specialization(scenario):
    assert all(stopped for stopped, _ in scenario["entries"])
    assert scenario["foreign_stopped"] is False  # another library's kernel compiles and runs as usual
    # the row count is no argument of the kernel: 5 launches, 3 specializations (2880 with a residual, 250, 96)
    assert scenario["requests"] == [["quickmoe.kernels.rms_norm", "_rms_norm_kernel", ["cuda", 90, 32]]] * 3


def test_a_worker_compiles_each_request_under_the_key_the_jit_looks_up(scenario):
    assert scenario["existed"] == [False] * 5 and scenario["cached_before"] == [False] * 3
    assert [error for error, _ in scenario["results"][:3]] == [None] * 3
    assert scenario["exist_after"] == [True] * 5, "a worker compiled under another key: the launch compiles again"
    assert scenario["json_names"] == ["_rms_norm_kernel"] * 5
    assert scenario["cached_after"] == [True] * 3
    assert scenario["again"] == [[None, True]]  # a request in the cache is found, not compiled again


def test_the_recorder_hands_on_each_new_specialization_as_it_is_seen(scenario):
    # 3 launches, 2 specializations (2880 with a residual twice, then 250), each handed on once, when first launched:
    # the first recorder's first two requests
    assert scenario["seen"] == [["_rms_norm_kernel", True], ["_rms_norm_kernel", True]]


def test_a_stream_compiles_requests_handed_on_one_at_a_time_and_answers_in_their_order(scenario):
    (first, first_error, _), (second, second_error, second_cached), (third, third_error, _) = scenario["streamed"]
    assert [first, second, third] == ["_rms_norm_kernel", "_rms_norm_kernel", "_no_such_kernel"]
    assert "source differs" in first_error and third_error and "_no_such_kernel" in third_error
    assert second_error is None and second_cached  # compiled by the first pool: found in the cache


def test_a_stream_survives_a_dead_worker_and_fails_what_no_worker_took(scenario):
    # the dead worker fails the one request its thread took; the live one compiles (finds) the rest
    assert all(same for same, _, _ in scenario["one_dead"])
    errors = [error for _, error, _ in scenario["one_dead"]]
    assert sum(e is not None for e in errors) == 1 and any(k in str(errors) for k in ("BrokenPipe", "EOFError"))
    assert all(cached for _, error, cached in scenario["one_dead"] if error is None)
    # a single dead worker: its request fails, the rest fail as taken by no worker; none is missing
    all_dead = scenario["all_dead"]
    assert all(same for same, _ in all_dead) and len(all_dead) == 3
    assert all_dead[0][1] is not None and all(e == "no worker was left to compile it" for _, e in all_dead[1:])


def test_the_pool_reports_what_it_cannot_compile_and_goes_on(scenario):
    assert scenario["same_order"]
    (stale_error, _), (missing_error, _) = scenario["results"][3:]
    assert "source differs" in stale_error
    assert "AttributeError" in missing_error and "_no_such_kernel" in missing_error


_KEYS = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from triton.runtime.jit import JITFunction
    import quickmoe.kernels.moe_gemm2_kernel as gemm, quickmoe.kernels.moe_tiles as tiles
    from quickmoe.executor.kernel_keys import quickmoe_jit_functions, settle_kernel_keys
    if sys.argv[1] == "helpers-first":
        for value in vars(tiles).values():
            if isinstance(value, JITFunction):
                value.cache_key
    if sys.argv[1] == "changed-global":  # a constexpr global with another value than when the keys were stored
        import triton.language as tl
        gemm.PAIRS_ACC = tl.constexpr(3.0)
    lazy = gemm._gemm2_kernel.cache_key
    passes = settle_kernel_keys(Path(sys.argv[2]))
    print(json.dumps({"lazy": lazy, "settled": gemm._gemm2_kernel.cache_key, "passes": passes,
                      "all": sorted(f.cache_key for f in quickmoe_jit_functions())}))
''')


def test_settled_kernel_keys_do_not_depend_on_the_order_of_first_launches(tmp_path):
    """Triton's key of a kernel depends on whether its helpers were hashed before it (kernel_keys.py); settled,
    it is the same in a process that hashed the kernel first and in one that hashed its helpers first; a third
    process takes the stored keys (no pass) and has the same ones."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    keys = {}
    for order, store in (("kernel-first", "a"), ("helpers-first", "b"), ("stored", "a")):
        proc = subprocess.run([sys.executable, "-c", _KEYS, order, str(tmp_path / store)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        keys[order] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert keys["kernel-first"]["lazy"] != keys["helpers-first"]["lazy"], f"the check cannot fail: {keys}"
    assert keys["kernel-first"]["settled"] == keys["helpers-first"]["settled"] == keys["stored"]["settled"]
    assert keys["kernel-first"]["all"] == keys["helpers-first"]["all"] == keys["stored"]["all"]
    assert 2 <= keys["kernel-first"]["passes"] < 8 and 2 <= keys["helpers-first"]["passes"] < 8, keys
    assert keys["stored"]["passes"] == 0
    (stored,) = (tmp_path / "a").glob("*.json")
    table = json.loads(stored.read_text())
    table.pop(next(iter(table)))  # a function the store does not know: all computed again
    stored.write_text(json.dumps(table))
    proc = subprocess.run([sys.executable, "-c", _KEYS, "stored", str(tmp_path / "a")], env=env, capture_output=True,
                          text=True, timeout=300)
    partial = json.loads(proc.stdout.strip().splitlines()[-1])
    assert partial["passes"] >= 2 and partial["all"] == keys["kernel-first"]["all"]
    proc = subprocess.run([sys.executable, "-c", _KEYS, "changed-global", str(tmp_path / "a")], env=env,
                          capture_output=True, text=True, timeout=300)
    changed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert changed["passes"] >= 2 and changed["settled"] != keys["stored"]["settled"], "a stale key was taken"


_GLUON = textwrap.dedent('''
    import hashlib, json
    import torch, triton
    from pathlib import Path
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from triton.runtime.cache import get_cache_key, get_cache_manager
    from triton.runtime.jit import compute_cache_key, create_function_from_signature

    from quickmoe.executor.compile_workers import compile_request
    from quickmoe.executor.kernel_precompile import LaunchRecorder
    from quickmoe.kernels import moe_gemm_register as reg

    TARGET = GPUTarget("cuda", 90, 32)
    fn = reg._gemm1_register_kernel
    E, I, H, BM, A = 4, 128, 128, 64, 40
    x = torch.empty(3 * BM, H, dtype=torch.bfloat16)
    w1 = torch.empty(E * 2 * I, H // 2, dtype=torch.uint8)
    layouts = [gl.NVMMASharedLayout.get_default_for([rows, 64], gl.bfloat16) for rows in (BM, BM // 2)]
    args = (TensorDescriptor.from_tensor(x, [BM, 64], layouts[0]),
            TensorDescriptor.from_tensor(x, [BM // 2, 64], layouts[1]),
            TensorDescriptor.from_tensor(w1, [128, 32], reg.packed_bytes_layout(1)),
            TensorDescriptor.from_tensor(w1, [128, 32], reg.packed_bytes_layout(1)),
            torch.empty(E, H // 32, 2 * I, dtype=torch.uint8), torch.empty(E, 2 * I, dtype=torch.bfloat16),
            torch.empty(A, I, dtype=torch.bfloat16), torch.empty(3 * BM, dtype=torch.int32),
            torch.empty(3, dtype=torch.int32), torch.empty(1, dtype=torch.int32), A, 3, 7.0, 1.702)
    kwargs = dict(H=H, I=I, BM=BM, HALF=BM // 2, STAGES=3, HAS_BIAS=True, RAGGED=False, SUB=1, GATHERED=False,
                  num_warps=4, debug=False, instrumentation_mode=triton.knobs.compilation.instrumentation_mode)
    # JITFunction.run up to its cache hook, for sm_90 instead of the device (as SCENARIO's launch_as_the_jit_does)
    backend = make_backend(TARGET)
    bound_args, specialization, options = create_function_from_signature(fn.signature, fn.params, backend)(
        *args, **kwargs)
    key = compute_cache_key({}, specialization, options)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, options)
    recorder = LaunchRecorder(TARGET)
    stopped = fn._call_hook(recorder, key, signature, 0, constexprs, options, [attrs], False)
    src = GluonASTSource(fn, signature, constexprs, attrs)  # what the Gluon JIT compiles and looks up
    opts = backend.parse_options(dict(options.__dict__, **src.parse_options()))
    digest = hashlib.sha256(get_cache_key(src, backend, opts, get_cache_invalidating_env_vars()).encode())
    entry = Path(get_cache_manager(digest.hexdigest()).cache_dir) / f"{src.name}.json"
    (request,) = recorder.requests.values()
    result = compile_request(request, launcher=False)
    print(json.dumps({"stopped": stopped, "error": result.error, "exists": entry.exists()}))
''')


def test_a_worker_compiles_a_gluon_kernel_under_the_key_the_jit_looks_up(tmp_path):
    """The register-operand GEMM 1 is a Gluon kernel: its recorded launch is rebuilt from Gluon's source class (a
    Triton one does not compile it), and lands in the kernel cache where its launch looks it up."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-c", _GLUON], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"stopped": True, "error": None, "exists": True}
