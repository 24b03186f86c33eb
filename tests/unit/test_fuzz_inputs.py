"""Property-based fuzzing of every input a user gives through the Python API and the command line (the HTTP schemas
are fuzzed in tests/server/test_fuzz.py): any value of any type either raises quickmoe's typed error naming the field,
or is accepted, and what is accepted runs and respects the request (at most max_tokens tokens, no stop string in
the text, logprobs as many as asked). Seeded (derandomize) and bounded (max_examples) so CI stays fast."""

from __future__ import annotations

import math
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from quickmoe.cli import build_parser, checked_inputs
from quickmoe.config import EngineConfig
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import ConfigError, QuickMoEError, RequestError
from quickmoe.llm import LLM

set_hypothesis_home_dir(tempfile.mkdtemp(prefix="quickmoe-hypothesis-"))  # its caches stay out of the repository
FAST = dict(derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])

junk = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                 st.text(max_size=6), st.lists(st.integers(-3, 5), max_size=3), st.tuples(st.text(max_size=3)),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=1))

SAMPLING = {
    "max_tokens": st.one_of(st.integers(-2, 40), junk), "temperature": st.one_of(st.floats(-1, 3), junk),
    "top_p": st.one_of(st.floats(-0.5, 1.5), junk), "top_k": st.one_of(st.integers(-3, 300000), junk),
    "seed": st.one_of(st.none(), st.integers(-(2**65), 2**65), junk),
    "stop_token_ids": st.one_of(st.lists(st.integers(-2, 300000), max_size=3), junk),
    "ignore_eos": st.one_of(st.booleans(), junk), "stop": st.one_of(st.text(max_size=3), st.lists(st.text(max_size=3),
                                                                                                max_size=3), junk),
    "include_stop_str_in_output": st.one_of(st.booleans(), junk),
    "skip_special_tokens": st.one_of(st.booleans(), junk), "logprobs": st.one_of(st.none(), st.integers(-2, 25), junk),
}
ENGINE = {
    "model": st.one_of(st.none(), st.text(max_size=5), junk), "device": st.one_of(st.sampled_from(
        ["auto", "cpu", "cuda", "cuda:1", "tpu", ""]), junk),
    "dtype": st.one_of(st.sampled_from(["auto", "float32", "bfloat16", "fp8"]), junk),
    "max_model_len": st.one_of(st.none(), st.integers(-2, 10**6), junk), "max_num_seqs": st.one_of(st.integers(-1, 999),
                                                                                                    junk),
    "max_num_batched_tokens": st.one_of(st.integers(-1, 10**5), junk), "seed": st.one_of(st.integers(-(2**65), 2**65),
                                                                                        junk),
    "moe_kernels": st.one_of(st.sampled_from(["auto", "torch", "triton", "cutlass"]), junk),
    "attention_kernels": st.one_of(st.sampled_from(["auto", "torch", "triton"]), junk),
    "compile": st.one_of(st.sampled_from(["on", "off", "max"]), junk),
    "cuda_graphs": st.one_of(st.sampled_from(["on", "off"]), junk), "block_size": st.one_of(st.sampled_from(
        [8, 16, 32, 64, 128, 256]), junk),
    "kv_cache_memory": st.one_of(st.none(), st.integers(-5, 2**40), junk),
    "gpu_memory_utilization": st.one_of(st.floats(-1, 2), junk), "num_kv_blocks": st.one_of(st.none(),
                                                                                            st.integers(-1, 10**6), junk),
    "long_prefill_token_threshold": st.one_of(st.none(), st.integers(-1, 10**5), junk),
}


@settings(max_examples=400, **FAST)
@given(st.fixed_dictionaries({}, optional=SAMPLING))
def test_sampling_params_are_valid_or_a_request_error_naming_the_field(kwargs):
    try:
        params = SamplingParams(**kwargs)
    except RequestError as exc:
        assert str(exc).startswith("sampling parameter '") and str(exc).split("'")[1] in kwargs, exc
        return
    assert isinstance(params.max_tokens, int) and params.max_tokens >= 1
    assert math.isfinite(params.temperature) and params.temperature >= 0 and 0 < params.top_p <= 1
    assert params.top_k >= 0 and all(isinstance(s, str) and s for s in params.stop)
    assert params.logprobs is None or 0 <= params.logprobs <= 20
    assert params.greedy == (params.temperature < 1e-5)


@settings(max_examples=300, **FAST)
@given(st.fixed_dictionaries({}, optional=ENGINE))
def test_engine_configs_are_valid_or_a_config_error_naming_the_field(kwargs):
    try:
        config = EngineConfig(**kwargs)
    except ConfigError as exc:
        assert str(exc).startswith("engine option '") and str(exc).split("'")[1] in kwargs, exc
        return
    assert config.max_num_seqs >= 1 and config.max_num_batched_tokens >= 1 and config.block_size in (16, 32, 64, 128)
    assert 0 < config.gpu_memory_utilization <= 1
    for device in ("cpu", "cuda"):
        assert 1 <= config.resolved_long_prefill_token_threshold(device) <= config.max_num_batched_tokens


# -- the command line: parse + validate, everything that runs before a model loads --------------------------------

number = st.one_of(st.integers(-(2**66), 2**66).map(str), st.floats(allow_nan=True).map(repr),
                   st.sampled_from(["", " ", "1e999", "0x10", "nan", "-inf", "4GiB", "1 000"]))
FLAGS = {
    "--max-tokens": number, "--temperature": number, "--top-p": number, "--top-k": number, "--seed": number,
    "--stop": st.text(max_size=3), "--max-model-len": number, "--max-num-seqs": number,
    "--max-num-batched-tokens": number, "--long-prefill-token-threshold": number, "--kv-cache-memory": number,
    "--gpu-memory-utilization": number, "--block-size": number, "--device": st.sampled_from(["cpu", "cuda:0", "x"]),
    "--moe-kernels": st.sampled_from(["torch", "triton", "y"]), "--port": number, "--max-waiting": number,
    "--drain-timeout": number, "--api-key": st.text(max_size=4), "--host": st.sampled_from(["127.0.0.1", "", "a b"]),
}
SERVE_ONLY = {"--port", "--max-waiting", "--drain-timeout", "--api-key", "--host"}
GENERATE_ONLY = {"--max-tokens", "--temperature", "--top-p", "--top-k", "--seed", "--stop"}


@st.composite
def command_lines(draw) -> list[str]:
    command = draw(st.sampled_from(["generate", "serve"]))
    skip = SERVE_ONLY if command == "generate" else GENERATE_ONLY
    flags = draw(st.lists(st.sampled_from(sorted(set(FLAGS) - skip)), max_size=4, unique=True))
    argv = [command] + (["--prompt", "hi"] if command == "generate" else [])
    for flag in flags:
        argv.append(f"{flag}={draw(FLAGS[flag])}")
    return argv


@settings(max_examples=300, **{**FAST, "suppress_health_check": [HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture]})
@given(argv=command_lines())
def test_command_lines_parse_and_validate_or_fail_in_one_line(argv, capsys, monkeypatch):
    monkeypatch.delenv("QUICKMOE_API_KEY", raising=False)
    capsys.readouterr()
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: usage and one `error:` line, status 2
        err = capsys.readouterr().err
        assert exc.code == 2 and sum(line.startswith("quickmoe") and "error:" in line for line in err.splitlines()) == 1
        return
    try:
        checked = checked_inputs(args)
    except QuickMoEError as exc:
        assert "\n" not in str(exc) and ("option" in str(exc) or "parameter" in str(exc)), exc
        return
    assert isinstance(checked["engine"], EngineConfig)
    assert isinstance(checked.get("sampling", checked.get("server")), (SamplingParams, object))


# -- the Python API end to end: what is accepted runs and respects the request ------------------------------------

@pytest.fixture(scope="module")
def llm() -> LLM:
    return LLM(None, device="cpu", max_model_len=64, kv_cache_memory=32 << 20, max_num_batched_tokens=48, max_num_seqs=8)


WORDS = st.text(alphabet="ab ,.", min_size=1, max_size=3)


@settings(max_examples=120, **FAST)
@given(prompt=st.one_of(st.text(max_size=20), st.lists(st.integers(0, 201087), min_size=1, max_size=20),
                        st.lists(st.one_of(st.integers(-3, 300000), st.floats(0, 9), st.booleans()), max_size=4),
                        st.binary(max_size=3), junk),
       max_tokens=st.integers(1, 8), temperature=st.sampled_from([0.0, 1e-300, 0.7, 1.5]),
       top_p=st.floats(0.05, 1), top_k=st.integers(-1, 50), seed=st.one_of(st.none(), st.integers(0, 2**32)),
       stop=st.lists(WORDS, max_size=2), include_stop=st.booleans(), logprobs=st.one_of(st.none(), st.integers(0, 5)),
       ignore_eos=st.booleans())
def test_accepted_requests_run_and_respect_what_they_asked(llm, prompt, max_tokens, temperature, top_p, top_k, seed,
                                                         stop, include_stop, logprobs, ignore_eos):
    params = SamplingParams(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
                            stop=stop, include_stop_str_in_output=include_stop, logprobs=logprobs,
                            ignore_eos=ignore_eos)
    try:
        out = llm.generate([prompt], params)[0]
    except RequestError as exc:  # an empty prompt, ids out of the vocabulary or not integers: named
        assert "prompt 0" in str(exc)
        return
    assert isinstance(prompt, str) or type(prompt) is int or all(type(t) is int for t in prompt)  # [id]: one prompt
    assert 1 <= len(out.token_ids) <= max_tokens and out.finish_reason in ("stop", "length")
    if isinstance(out.stop_reason, str):
        assert out.stop_reason in stop and out.text.endswith(out.stop_reason) == include_stop
        body = out.text[:-len(out.stop_reason)] if include_stop else out.text
    else:
        body = out.text
    assert not any(s in body for s in stop), (out.text, stop)
    if logprobs is None:
        assert out.logprobs is None
    else:
        assert len(out.logprobs) == len(out.token_ids)
        assert all(lp.token_id == t and len(lp.top) == logprobs for lp, t in zip(out.logprobs, out.token_ids))
    assert llm.engine.blocks.num_sequences == 0
