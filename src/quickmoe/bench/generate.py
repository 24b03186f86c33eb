"""`quickmoe bench generate DIR`: offline generation throughput and the batch-1 decode step against its roofline.

1. Throughput: `LLM.generate` over N prompts of exactly `input_len` random token ids, `output_len` tokens each
   (greedy, EOS ignored, so every request runs to the end): output tokens/s over the wall time. Before it, after
   a warm-up, the engine's idle work runs to its end, as `quickmoe serve` runs it once idle after start-up (the
   decode graphs of buckets beyond --cuda-graphs-startup-max), so no capture falls inside the timed run.
   On CUDA the run's steps are timed with events (executor/step_timer.py): GPU time per step, and the GPU's idle
   time between steps, the host work the pipeline did not hide (exposed host time), and the run's seconds
   outside its steps (before the first: checking and queueing the prompts; after the last: the outputs).
2. Decode at batch 1: one request alone; the median time between its successive tokens reaching the host
   (one engine step each) against the roofline = bytes a decode step must read (every weight but the
   experts, the embedding row, the top-k experts' bytes of every layer, and the KV cache of the context)
   over the HBM bandwidth measured in the same run (`bench.moe.measure_ceilings`: a 1 GiB device copy; CUDA
   only), with its GPU time and exposed host time per step.
3. Where the GPU time of a decode step goes, by op family (attention, moe, dense, other), at batch 1 and at the
   throughput run's batch size, and that of the steps that carry prompt chunks beside decode rows, as the
   throughput run's first steps do (bench/step_profile.py, a torch.profiler trace; CUDA only).
4. `--baseline transformers`: transformers' `generate` on the same checkpoint and prompts in a fresh process
   (quickmoe's model freed first), batched `baseline_batch_size` at a time (the prompts have equal lengths,
   so no padding), over the first `baseline_prompts` prompts; output tokens/s side by side.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from quickmoe.bench.step_profile import family_shares_line, profile_decode, profile_mixed
from quickmoe.errors import ConfigError
from quickmoe.tokenizer.base import Tokenizer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerateBenchOptions:
    """What `bench generate` runs; validated at construction. `engine` holds EngineConfig options."""

    model: str
    num_prompts: int = 256
    input_len: int = 1000
    output_len: int = 1000
    decode_steps: int = 64
    baseline: str = "none"
    baseline_prompts: int = 32
    baseline_batch_size: int = 32
    seed: int = 0
    json_out: str | None = None
    engine: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (Path(self.model) / "config.json").is_file():
            raise ConfigError(f"bench generate: {self.model} is not a checkpoint directory (no config.json)")
        for name in ("num_prompts", "input_len", "output_len", "decode_steps", "baseline_prompts",
                     "baseline_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"bench generate option '{name}' = {value!r}: expected an integer >= 1")
        if self.baseline not in ("none", "transformers"):
            raise ConfigError(f"bench generate option 'baseline' = {self.baseline!r}: expected 'none' or "
                              "'transformers'")


def random_prompts(num: int, length: int, ids: tuple[int, int], seed: int) -> list[tuple[int, ...]]:
    """Prompts of exactly `length` ids drawn uniformly from [ids[0], ids[1]): the caller passes the ordinary text
    ids (`text_ids`), so that no prompt holds a special token or an id the tokenizer lacks. Tuples, which the cyclic
    collector stops tracking: the bench's own prompts add nothing to its full passes during the timed run."""
    rng = random.Random(seed)
    low, high = ids
    return [tuple(rng.randrange(low, high) for _ in range(length)) for _ in range(num)]


def text_ids(model_vocab_size: int, tokenizer: Tokenizer) -> tuple[int, int]:
    """[low, high): ids that are ordinary text in both the model and the tokenizer. Special tokens at the start of
    the vocabulary (Mistral's and Llama's <unk>, <s>, </s> at 0-2) are below `low`; `high` is the first special
    token after them (gpt-oss: 199,998; Qwen3: 151,643), at most both vocabularies (Qwen3's model has 267 rows
    past its tokenizer's ids)."""
    specials = set(tokenizer.special_token_ids)
    low = 0
    while low in specials:
        low += 1
    high = min(model_vocab_size, tokenizer.vocab_size, min((t for t in specials if t > low), default=model_vocab_size))
    if high <= low:
        raise ConfigError(f"bench generate: the model's {model_vocab_size} ids and its tokenizer's "
                          f"{tokenizer.vocab_size} leave no ordinary text id to draw prompts from (special tokens "
                          f"from 0 to {low - 1})")
    return low, high


def decode_bytes_per_step(model, config, context_len: int, kv_element_size: int) -> int:
    """Bytes one batch-1 decode step must read at `context_len`: every parameter once, except the experts
    (top-k of E: k/E of their bytes) and the embedding (one row); plus each layer's K and V over the
    positions it attends to (a sliding layer: its window)."""
    total = 0
    k_over_e = config.num_experts_per_tok / config.num_local_experts
    for name, param in model.named_parameters():
        nbytes = param.numel() * param.element_size()
        if ".experts." in name:
            nbytes = int(nbytes * k_over_e)
        elif name.endswith("embed_tokens.weight") and not config.tie_word_embeddings:
            nbytes = param.shape[-1] * param.element_size()
        total += nbytes
    for layer in range(config.num_hidden_layers):
        window = config.layer_window(layer)
        positions = context_len if window is None else min(context_len, window)
        total += 2 * positions * config.num_key_value_heads * config.head_dim * kv_element_size
    return total


def run_generate_bench(opts: GenerateBenchOptions) -> dict:
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM
    from quickmoe.startup.gc_pause import serving_gc_frozen

    freeze_heap = serving_gc_frozen()  # a bad QUICKMOE_SERVING_GC fails before the load
    engine = dict(opts.engine)
    engine.setdefault("max_num_seqs", min(opts.num_prompts, 256))
    engine.setdefault("max_model_len", opts.input_len + opts.output_len)
    llm = LLM(opts.model, **engine)
    prompts = random_prompts(opts.num_prompts, opts.input_len, text_ids(llm.config.vocab_size, llm.tokenizer),
                             opts.seed)
    greedy = dict(temperature=0, ignore_eos=True)
    llm.generate(prompts[:2], SamplingParams(max_tokens=4, **greedy))  # warm-up: kernels compiled, caches touched
    # What `quickmoe serve` does once idle after start-up (IDLE_WORK_DELAY_S): the decode graphs left for later
    # are captured and the MoE kernels of prefill sizes compiled before the load arrives, not in the timed run.
    llm.engine.heap_freeze.armed = freeze_heap  # as serve: the heap frozen once the idle work is done
    t_idle = time.perf_counter()
    idle_pieces = llm.engine.finish_idle_work()
    idle_s = time.perf_counter() - t_idle
    timer = llm.runner.step_timer
    timer.enabled = llm.runner.device.type == "cuda"
    timer.reset()
    t0 = time.perf_counter()
    outs = llm.generate(prompts, SamplingParams(max_tokens=opts.output_len, **greedy))
    elapsed = time.perf_counter() - t0
    steps = timer.summary()
    if steps:  # the run's host time before its first step and after its last (checking and queueing the prompts,
        # collecting the outputs): the step timer's exposed host time counts only the gaps between steps
        steps["outside_steps_s"] = max(elapsed - steps["wall_ms"] / 1e3, 0.0)
    generated = sum(len(o.token_ids) for o in outs)
    doc = {"model": opts.model, "device": str(llm.runner.device), "dtype": str(llm.runner.dtype),
           "num_prompts": opts.num_prompts, "input_len": opts.input_len, "output_len": opts.output_len,
           "engine": {k: v for k, v in asdict(llm.engine_config).items() if k != "model"},
           "quickmoe": {"seconds": elapsed, "output_tokens": generated, "output_tokens_per_s": generated / elapsed,
                        "total_tokens_per_s": (generated + opts.num_prompts * opts.input_len) / elapsed,
                        "preemptions": llm.engine.scheduler.num_preemptions, "steps": steps},
           "idle_work_before_run": {"pieces": idle_pieces, "seconds": idle_s},
           # the start-up the table shows, with every rank's phases and the slowest rank's (info.ranks) with -tp N
           "startup": llm.startup_report.to_dict()}
    doc["decode_batch1"] = _decode_batch1(llm, prompts[0], opts)
    timer.enabled = False
    batch = min(opts.num_prompts, llm.engine_config.max_num_seqs)
    doc["op_families"] = {"batch1": profile_decode(llm, prompts[:1], 16),
                          f"batch{batch}": profile_decode(llm, prompts[:batch], 8),
                          # prompts of their own: the run's would find their blocks in the prefix cache
                          "mixed": profile_mixed(llm, random_prompts(batch, opts.input_len, text_ids(
                              llm.config.vocab_size, llm.tokenizer), opts.seed + 1), 4)}
    device = llm.runner.device
    del llm, outs
    gc.collect()
    if device.type == "cuda":
        import torch

        torch.cuda.empty_cache()
    if opts.baseline == "transformers":
        doc["transformers"] = _transformers_baseline(opts, prompts[:opts.baseline_prompts], str(device))
    if opts.json_out:
        Path(opts.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    print(format_generate_table(doc))
    return doc


def _decode_batch1(llm, prompt: Sequence[int], opts: GenerateBenchOptions) -> dict:
    """Median time between one request's successive tokens (each an engine step), its GPU time and exposed host
    time per step, and its roofline at the mean context."""
    from quickmoe.engine.sampling_params import SamplingParams

    engine, timer = llm.engine, llm.runner.step_timer
    engine.add_request("bench-decode", prompt, SamplingParams(max_tokens=opts.decode_steps + 1, temperature=0,
                                                              ignore_eos=True))
    arrivals = []
    while engine.has_unfinished():
        outs = engine.step()
        if any(o.token_ids for o in outs):
            arrivals.append(time.perf_counter())
        if len(arrivals) == 1:
            timer.reset()  # from the first decode on
    times = [b - a for a, b in zip(arrivals, arrivals[1:])]
    step_s = statistics.median(times)
    context = len(prompt) + opts.decode_steps // 2
    kv_element_size = llm.runner.kv_cache.keys[0].element_size()
    nbytes = decode_bytes_per_step(llm.runner.model, llm.config, context, kv_element_size)
    from quickmoe.bench.moe import measure_ceilings

    hbm = measure_ceilings(llm.runner.device).get("hbm_gb_per_s")
    roofline_s = nbytes / (hbm * 1e9) if hbm else None
    return {"steps": len(times), "step_s": step_s, "bytes_per_step": nbytes, "hbm_gb_per_s": hbm,
            "roofline_s": roofline_s, "over_roofline": step_s / roofline_s if roofline_s else None,
            "gpu": timer.summary()}


def _transformers_baseline(opts: GenerateBenchOptions, prompts: Sequence[Sequence[int]], device: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        prompts_file, out_file = Path(tmp) / "prompts.json", Path(tmp) / "out.json"
        prompts_file.write_text(json.dumps(prompts))
        cmd = [sys.executable, "-m", "quickmoe.bench.transformers_generate", opts.model, "--device", device,
               "--prompts", str(prompts_file), "--output-len", str(opts.output_len), "--batch-size",
               str(opts.baseline_batch_size), "--json", str(out_file)]
        run = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        if run.returncode != 0:
            logger.error("transformers baseline failed:\n%s", run.stderr[-3000:])
            return {"error": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "failed"}
        return json.loads(out_file.read_text())


def format_generate_table(doc: dict) -> str:
    q, d = doc["quickmoe"], doc["decode_batch1"]
    lines = [f"bench generate: {doc['model']} on {doc['device']} ({doc['dtype']}), {doc['num_prompts']} prompts x "
             f"{doc['input_len']} tokens -> {doc['output_len']} tokens each",
             f"{'engine':<14}{'prompts':>8}{'seconds':>10}{'output tok/s':>14}{'total tok/s':>13}"]
    lines.append(f"{'quickmoe':<14}{doc['num_prompts']:>8}{q['seconds']:>10.2f}{q['output_tokens_per_s']:>14.1f}"
                 f"{q['total_tokens_per_s']:>13.1f}")
    hf = doc.get("transformers")
    if hf and "error" not in hf:
        lines.append(f"{'transformers':<14}{hf['num_prompts']:>8}{hf['seconds']:>10.2f}"
                     f"{hf['output_tokens_per_s']:>14.1f}{hf['total_tokens_per_s']:>13.1f}")
        lines.append(f"output tokens/s ratio quickmoe / transformers: "
                     f"{q['output_tokens_per_s'] / hf['output_tokens_per_s']:.2f}x "
                     f"(transformers batch size {hf['batch_size']})")
    elif hf:
        lines.append(f"transformers: {hf['error']}")
    roof = (f"; roofline {d['roofline_s'] * 1e3:.3f} ms ({d['bytes_per_step'] / 1e9:.3f} GB at "
            f"{d['hbm_gb_per_s']:.0f} GB/s), {d['over_roofline']:.2f}x the roofline" if d["roofline_s"] else
            f"; {d['bytes_per_step'] / 1e9:.3f} GB per step (no HBM ceiling on this device)")
    lines.append(f"decode at batch 1: median step {d['step_s'] * 1e3:.3f} ms over {d['steps']} steps{roof}")
    for label, steps in (("throughput run", q.get("steps")), ("decode at batch 1", d.get("gpu"))):
        if steps:
            lines.append(f"{label}: GPU {steps['gpu_ms_median']:.3f} ms per step (median of {steps['steps']} steps, "
                         f"median batch {steps['batch_size_median']:g}); GPU idle between steps "
                         f"{steps['idle_ms_median']:.3f} ms median, exposed host time "
                         f"{100 * steps['exposed_host_fraction']:.1f}% of the wall time; host: "
                         f"{steps['host_queue_ms_median']:.3f} ms to queue a step, one started every "
                         f"{steps['host_cycle_ms_median']:.3f} ms (medians)"
                         + (f"; {steps['outside_steps_s']:.3f} s of the run outside its steps (queueing the prompts, "
                            f"collecting the outputs)" if "outside_steps_s" in steps else ""))
    kinds = (q.get("steps") or {}).get("by_kind")
    if kinds:
        lines.append("throughput run by step kind: " + "; ".join(
            f"{kind} {k['steps']} steps, {k['tokens']} tokens, GPU {k['gpu_ms_total'] / 1e3:.2f} s "
            f"(median {k['gpu_ms_median']:.3f} ms; first tenth {k['gpu_ms_first_tenth_median']:.3f}, last tenth "
            f"{k['gpu_ms_last_tenth_median']:.3f})" for kind, k in kinds.items()))
    for label, prof in (doc.get("op_families") or {}).items():
        if prof:
            lines.append(f"{_profiled_steps(prof)} by op family (profiler): {family_shares_line(prof)}")
    lines.append(f"preemptions during the throughput run: {q['preemptions']}")
    idle = doc.get("idle_work_before_run")
    if idle and idle["pieces"]:
        lines.append(f"before the run, as serve does once idle: {idle['pieces']} pieces of idle work (deferred decode "
                     f"graphs, MoE kernels of prefill sizes) in {idle['seconds']:.2f} s")
    return "\n".join(lines)


def _profiled_steps(prof: dict) -> str:
    """What an op-family profile timed, for its line of the table."""
    if prof.get("kind") != "mixed":
        return f"decode step at batch {prof['batch_size']}"
    kinds = prof.get("step_kinds") or {}
    steps = sum(k["steps"] for k in kinds.values()) or prof["steps"]
    tokens = sum(k["tokens"] for k in kinds.values())
    which = ", ".join(f"{k['steps']} {kind}" for kind, k in kinds.items())
    return (f"mixed step ({prof['batch_size']} prompts started together; {tokens / steps:.0f} tokens a step, "
            f"prompt chunks beside decode rows; steps {which or '?'})")
