"""Bad input on the command line ends with one line, `error: ...` naming the flag or file and what was expected,
and exit status 2: never a traceback, never a server that runs anyway. Also the Python API's typed errors for the
same inputs, and `quickmoe info` validating everything `generate` validates before loading."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quickmoe.checkpoint.default_model import ensure_default_model
from quickmoe.cli import main
from quickmoe.errors import ConfigError
from quickmoe.llm import LLM


def one_line_error(capsys, argv: list[str], *needles: str) -> str:
    """Run the CLI in this process; it must return 2 and print exactly one `error:` line holding the needles (a
    checkpoint that does not match the model lists its problems on indented lines after it)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    message = err[err.index("error:"):]
    assert all(line.startswith("  ") for line in message.splitlines()[1:]), message
    for needle in needles:
        assert needle in message, message
    return message


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m quickmoe ARGS` in a fresh process, without Triton's CPU interpreter (as a user runs it)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "QUICKMOE_API_KEY")}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "quickmoe", *args], capture_output=True, text=True, timeout=timeout,
                          env=environ)


def assert_one_line(result: subprocess.CompletedProcess, *needles: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture()
def model_copy(tmp_path) -> Path:
    src = ensure_default_model()
    out = tmp_path / "model"
    shutil.copytree(src, out)
    return out


# -- serve: an empty API key is not "no key" ---------------------------------------------------------------------

@pytest.mark.parametrize("flag, env", [(["--api-key", ""], {}), (["--api-key", "   "], {}),
                                       ([], {"QUICKMOE_API_KEY": ""}), ([], {"QUICKMOE_API_KEY": " \t"})])
def test_serve_refuses_an_empty_or_blank_api_key_at_start_up(flag, env):
    result = run_cli("serve", "--port", "0", *flag, env=env, timeout=30)
    assert_one_line(result, "api_key")
    assert "serving" not in result.stderr


# -- generate / the Python API: out-of-range values and impossible settings --------------------------------------

@pytest.mark.parametrize("argv, needles", [
    (["--seed", str(2**70)], ("'seed'", str(2**70))),
    (["--seed", str(-(2**63) - 1)], ("'seed'",)),
    (["--kv-cache-memory", "100TiB"], ("kv_cache_memory",)),
    (["--max-tokens", "0"], ("'max_tokens' = 0",)),
    (["--temperature", "nan"], ("'temperature' = nan",)),
    (["--top-p", "0"], ("'top_p' = 0",)),
    (["--max-model-len", "1"], ("'max_model_len' = 1",)),
    (["--max-num-batched-tokens", "-3"], ("'max_num_batched_tokens' = -3",)),
    (["--gpu-memory-utilization", "inf"], ("'gpu_memory_utilization' = inf",)),
    (["--device", "tpu"], ("'device' = 'tpu'",)),
    (["--cuda-graphs-startup-max", "0"], ("'cuda_graphs_startup_max' = 0", "an integer >= 1")),
    (["--cuda-graphs-prefill-tokens", "-1"], ("'cuda_graphs_prefill_tokens' = -1", "an integer >= 0")),
    (["--cuda-graph-sizes", "1", "512"], ("'cuda_graph_sizes' = [1, 512]", "max_num_seqs = 256")),
    (["--cuda-graph-sizes", "1,x"], ("--cuda-graph-sizes = '1,x'", "batch sizes")),
    (["--cuda-graph-sizes", "0", "4"], ("'cuda_graph_sizes' = (0, 4)", "batch sizes >= 1")),
])
def test_generate_rejects_bad_flags_in_one_line(capsys, argv, needles):
    one_line_error(capsys, ["generate", "--prompt", "hi", "--max-tokens", "2", "-q", *argv], *needles)


@pytest.mark.parametrize("flag", ["--attention-kernels", "--moe-kernels"])
def test_triton_kernels_on_a_cpu_only_run_are_refused(flag):
    result = run_cli("generate", "--prompt", "hi", "--max-tokens", "2", "--device", "cpu", flag, "triton")
    assert_one_line(result, flag.lstrip("-").replace("-", "_"), "'triton'", "CUDA")


def test_the_python_api_raises_typed_errors():
    with pytest.raises(ConfigError, match="'seed' = "):
        LLM(None, device="cpu", seed=2**64)
    with pytest.raises(ConfigError, match="kv_cache_memory"):
        LLM(None, device="cpu", kv_cache_memory=1 << 50)


# -- config.json and the checkpoint: unreadable or not what the model expects ------------------------------------

def _directory(cfg: Path) -> None:
    cfg.unlink()
    cfg.mkdir()


def _symlink_loop(cfg: Path) -> None:
    cfg.unlink()
    cfg.symlink_to(cfg.name)  # ELOOP: unreadable whoever runs it (root reads through chmod 000)


@pytest.mark.parametrize("damage, needle", [
    (_directory, "not a regular file (a directory)"),
    (lambda cfg: cfg.write_text('{"architectures": ["GptOssForCausalLM"],'), "not valid JSON"),
    (lambda cfg: cfg.write_bytes(b'{"architectures": ["\xff\xfe"]}'), "not valid UTF-8"),
    (_symlink_loop, "cannot read it"),
    (lambda cfg: cfg.write_text("[1, 2]"), "expected a JSON object"),
])
@pytest.mark.parametrize("command", ["generate", "info"])
def test_an_unreadable_config_json_is_one_line(capsys, model_copy, damage, needle, command):
    damage(model_copy / "config.json")
    extra = ["--prompt", "hi", "--device", "cpu"] if command == "generate" else []
    one_line_error(capsys, [command, str(model_copy), *extra, "-q"], "config.json", needle)


def _drop_tensor(model_dir: Path, name: str) -> None:
    """Rewrite the checkpoint without tensor `name` (header and index agree: only the model's check fails)."""
    from safetensors.torch import load_file, save_file

    shard = next(model_dir.glob("*.safetensors"))
    tensors = load_file(shard)
    del tensors[name]
    save_file(tensors, shard)
    index = model_dir / "model.safetensors.index.json"
    raw = json.loads(index.read_text())
    del raw["weight_map"][name]
    index.write_text(json.dumps(raw))


def test_info_validates_the_tensors_against_the_model_as_generate_does(capsys, model_copy):
    _drop_tensor(model_copy, "model.layers.1.self_attn.sinks")
    from_info = one_line_error(capsys, ["info", str(model_copy), "-q"], "missing tensor model.layers.1.self_attn.sinks")
    from_generate = one_line_error(capsys, ["generate", str(model_copy), "--prompt", "hi", "--device", "cpu", "-q"])
    assert from_info == from_generate


def test_info_of_a_good_checkpoint_still_describes_it(capsys, model_copy):
    assert main(["info", str(model_copy), "-q"]) == 0
    assert "architecture: GptOssForCausalLM" in capsys.readouterr().out




# -- serve: the names a vLLM user types ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv, needles", [
    (["--tensor-parallel-size", "0"], ("tensor_parallel_size", "0")),
    (["-tp", "-2"], ("tensor_parallel_size", "-2")),
    (["--pipeline-parallel-size", "2"], ("--pipeline-parallel-size 2",)),
    (["--chat-template", "t.jinja"], ("--chat-template", "harmony")),
    (["--trust-remote-code"], ("--trust-remote-code",)),
    (["--tool-call-parser", "hermes"], ("--tool-call-parser 'hermes'",)),
    (["--generation-config", "/nonexistent/dir"], ("--generation-config",)),
    (["--seed", "-1"], ()),  # in range: the check passes, then the port is taken below
])
def test_serve_refuses_what_it_cannot_honour_in_one_line(capsys, argv, needles):
    import socket

    with socket.socket() as taken:  # a serve that got past the flags would fail on the port, not load a model
        taken.bind(("127.0.0.1", 0))
        port = str(taken.getsockname()[1])
        needles = needles or ("cannot listen",)
        one_line_error(capsys, ["serve", "--port", port, "-q", *argv], *needles)


def test_parallel_flags_reach_the_engine_config():
    from quickmoe.cli import build_parser, checked_inputs

    for command in (["serve"], ["generate", "-p", "x"], ["bench", "generate", "DIR"]):
        args = build_parser().parse_args([*command, "-tp", "4", "--enable-expert-parallel"])
        engine = checked_inputs(args)["engine"]
        assert (engine.tensor_parallel_size, engine.enable_expert_parallel) == (4, True), command
    cold = build_parser().parse_args(["bench", "coldstart", "DIR", "-tp", "2", "--enable-expert-parallel"])
    from quickmoe.cli import _parallel_flags

    assert _parallel_flags(cold) == ("--tensor-parallel-size", "2", "--enable-expert-parallel")


def test_serve_takes_vllm_spellings():
    from quickmoe.cli import build_parser, checked_inputs

    args = build_parser().parse_args(["serve", "--kv-cache-memory-bytes", "2GiB", "--seed", "7",
                                      "--enable-auto-tool-choice", "--tool-call-parser", "openai",
                                      "--reasoning-parser", "openai_gptoss", "--no-enable-prefix-caching",
                                      "--enable-log-requests", "--disable-log-stats"])
    checked = checked_inputs(args)
    engine, server = checked["engine"], checked["server"]
    assert (engine.kv_cache_memory, engine.seed, engine.enable_prefix_caching) == (2 * 2**30, 7, False)
    assert server.log_requests and server.stats_interval_s is None


def test_generation_config_gives_the_sampling_defaults(tmp_path):
    from quickmoe.server.config import SamplingDefaults, load_sampling_defaults
    from quickmoe.server.protocol import ChatCompletionRequest, CompletionRequest
    from quickmoe.server.request_params import sampling_params

    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"temperature": 0.6, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.1, "max_new_tokens": 40}))
    defaults = load_sampling_defaults(tmp_path)
    assert defaults == SamplingDefaults(temperature=0.6, top_p=0.9, top_k=20, repetition_penalty=1.1, max_tokens=40)
    req = CompletionRequest.model_validate({"prompt": "x"})
    p = sampling_params(req, prompt_len=3, max_model_len=100, vocab_size=1000, defaults=defaults)
    assert (p.temperature, p.top_p, p.top_k, p.repetition_penalty, p.max_tokens) == (0.6, 0.9, 20, 1.1, 40)
    mine = CompletionRequest.model_validate({"prompt": "x", "temperature": 0, "top_k": 5, "max_tokens": 3})
    p = sampling_params(mine, prompt_len=3, max_model_len=100, vocab_size=1000, defaults=defaults)
    assert (p.temperature, p.top_k, p.max_tokens) == (0, 5, 3)  # what the request says wins
    chat = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "x"}]})
    assert sampling_params(chat, prompt_len=3, max_model_len=100, vocab_size=1000).max_tokens == 97
    assert load_sampling_defaults(tmp_path / "missing") == SamplingDefaults()
    (tmp_path / "generation_config.json").write_text("{bad")
    with pytest.raises(ConfigError, match="generation_config.json"):
        load_sampling_defaults(tmp_path)
