"""The offline Python API: `LLM(DIR).generate(prompts, SamplingParams(...))`, over the engine
(engine/engine.py): every prompt becomes a request, the engine batches them continuously over the paged
KV cache until all are done, and the outputs come back in prompt order."""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from quickmoe.config import EngineConfig
from quickmoe.distributed import SINGLE
from quickmoe.engine.engine import Engine, TokenLogprob
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import ConfigError, RequestError
from quickmoe.executor.model_runner import ModelRunner
from quickmoe.startup.early_start import EarlyStart
from quickmoe.startup.report import StartupReport
from quickmoe.tokenizer import load_tokenizer

logger = logging.getLogger(__name__)

Prompt = str | Sequence[int]


@dataclass
class RequestOutput:
    """The result of one prompt. finish_reason: 'stop' (EOS, a stop token or a stop string; stop_reason says
    which) or 'length' (max_tokens or max_model_len)."""

    prompt: str | None
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: str
    stop_reason: int | str | None = None
    logprobs: list[TokenLogprob] | None = None
    prompt_logprobs: list[TokenLogprob | None] | None = None  # with SamplingParams.prompt_logprobs


class LLM:
    """A gpt-oss model ready to generate. `model` is a checkpoint directory; None uses the embedded
    default (a small gpt-oss trained on the Python standard library's source, shipped in the package).
    `early_start`: background start-up work begun before torch was imported (`EarlyStart.begin`).

    `tensor_parallel_size=N` (> 1): this process becomes rank 0 of N (it spawns the others, one per GPU, or
    joins torchrun's ranks) and drives them; under torchrun, on ranks > 0 the constructor follows rank 0's steps
    and ends the process (status 0) when rank 0 shuts down. `shutdown()` (also at exit) stops the other ranks.
    `spawned_ranks`: the other ranks, already started (executor.spawn.spawn_ranks: the command line starts them
    before it imports torch)."""

    def __init__(self, model: str | Path | None = None, *, startup_report: StartupReport | None = None,
                 progress: bool = False, early_start: EarlyStart | None = None, spawned_ranks=None,
                 **engine_options) -> None:
        """`engine_options` are the fields of `EngineConfig` (device, dtype, max_model_len, max_num_seqs,
        max_num_batched_tokens, long_prefill_token_threshold, moe_kernels, attention_kernels, compile, cuda_graphs,
        cuda_graph_sizes, cuda_graphs_startup_max, cuda_graphs_prefill_tokens, block_size, kv_cache_memory,
        gpu_memory_utilization, num_kv_blocks, seed, enable_prefix_caching)."""
        fields = {f.name for f in dataclasses.fields(EngineConfig)} - {"model"}
        unknown = sorted(set(engine_options) - fields)
        if unknown:
            raise ConfigError(f"LLM option {unknown[0]!r}: unknown; expected one of {sorted(fields)}")
        self.engine_config = EngineConfig(model=None if model is None else str(model), **engine_options)
        self.startup_report = startup_report if startup_report is not None else StartupReport()
        if model is None:
            from quickmoe.checkpoint.default_model import ensure_default_model

            t0 = time.perf_counter()
            model = ensure_default_model()
            self.startup_report.info["default_model_s"] = time.perf_counter() - t0
            self.startup_report.skip()  # building the default model once is not part of a start-up
        self.model_dir = Path(model)
        self._ranks = None
        parallel = SINGLE
        if self.engine_config.tensor_parallel_size > 1:
            from quickmoe.executor.launch import start_ranks

            t0 = time.perf_counter()
            self._ranks = start_ranks(str(self.model_dir), self.engine_config, spawned_ranks)
            parallel = self._ranks.parallel
            self.startup_report.info["rendezvous_s"] = time.perf_counter() - t0
            if not parallel.is_driver:  # a torchrun rank > 0: follow rank 0 until it stops, then end here
                self._follow(parallel)
        # The tokenizer loads on a thread: the early start's (begun during the imports), else one started now
        # beside the weights. The `tokenizer` phase is what is left to wait for after the weights.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="quickmoe-tokenizer") as pool:
            tokenizer = (early_start.tokenizer if early_start is not None and early_start.tokenizer is not None
                         else pool.submit(load_tokenizer, self.model_dir))
            try:
                self.runner = ModelRunner(self.model_dir, self.engine_config, self.startup_report, progress=progress,
                                          early_start=early_start, parallel=parallel)
            except BaseException:
                if self._ranks is not None and self._ranks.spawned is not None:
                    self._ranks.spawned.abandon()  # this rank's own error, not the others' exit, is reported
                raise
            self.tokenizer = tokenizer.result()
        if parallel.sharded:
            from quickmoe.executor.workers import DriverRunner

            self.runner = DriverRunner(self.runner, parallel)
            atexit.register(self.shutdown)
        self.config = self.runner.config
        self.tokenizer.accept_model_ids(self.config.vocab_size)  # the model's ids past the tokenizer's: no text
        self.startup_report.mark("tokenizer")
        self.max_model_len = self.runner.max_model_len
        config = self.engine_config
        self.engine = Engine(self.runner, self.tokenizer, max_num_seqs=config.max_num_seqs,
                             max_num_batched_tokens=config.max_num_batched_tokens,
                             long_prefill_token_threshold=config.resolved_long_prefill_token_threshold(
                                 self.runner.device.type), enable_prefix_caching=config.enable_prefix_caching,
                             seed=config.seed)
        self._request_ids = itertools.count()

    def _follow(self, parallel) -> None:
        """A rank > 0 under torchrun: build this rank's share, run rank 0's steps, exit when it stops."""
        from quickmoe.distributed.env import close_parallel
        from quickmoe.executor.spawn import ignore_stop_signals
        from quickmoe.executor.workers import worker_loop

        ignore_stop_signals()
        runner = ModelRunner(self.model_dir, self.engine_config, self.startup_report, parallel=parallel)
        worker_loop(runner, parallel)
        close_parallel()
        raise SystemExit(0)

    def shutdown(self) -> None:
        """Stop the other ranks of a model spread over several (nothing to do with one); idempotent."""
        ranks, self._ranks = self._ranks, None
        if ranks is None:
            return
        from quickmoe.distributed.env import close_parallel

        if ranks.spawned is not None:
            ranks.spawned.stopping.set()
        self.runner.stop_workers()
        # NCCL's teardown waits for the CUDA graphs holding its collectives (every rank releases its own), and
        # is collective among a host's ranks: every rank leaves the process groups together, so a rank 0 that
        # waited for the others to exit first would hang in it (they wait in theirs for rank 0, and are killed
        # after join's timeout). On gloo neither matters.
        self.runner.release_graphs()
        close_parallel()
        if ranks.spawned is not None:
            ranks.spawned.join()

    # -- generation -------------------------------------------------------------------------------
    def generate(self, prompts: Prompt | Sequence[Prompt],
                 sampling_params: SamplingParams | Sequence[SamplingParams] | None = None) -> list[RequestOutput]:
        """Generate for each prompt (text, or a list of token ids). One SamplingParams for all, or one each.
        Every prompt is validated before any runs (RequestError names the prompt)."""
        if isinstance(prompts, (bytes, bytearray)) or not isinstance(prompts, Sequence):
            raise RequestError(f"prompts = {prompts!r:.60}: expected a string, a list of token ids, or a list of those")
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        prompts = list(prompts)
        if sampling_params is None:
            sampling_params = SamplingParams()
        params = [sampling_params] * len(prompts) if isinstance(sampling_params, SamplingParams) \
            else list(sampling_params)
        if len(params) != len(prompts):
            raise RequestError(f"got {len(params)} SamplingParams for {len(prompts)} prompts (expected one or "
                               "one per prompt)")
        if any(p.n != 1 for p in params):
            raise RequestError("sampling parameter 'n' > 1 is served by the HTTP API and Engine; LLM.generate "
                               "returns one output per prompt (pass a prompt several times, with different seeds)")
        prompt_ids = []  # tuples while the requests run (the collector stops tracking them), lists in the outputs
        for i, prompt in enumerate(prompts):
            try:
                prompt_ids.append(tuple(self.engine.prompt_ids(prompt)))
            except RequestError as exc:
                raise RequestError(f"prompt {i}: {exc}") from None
        ids = [f"llm-{next(self._request_ids)}" for _ in prompts]
        results = {rid: RequestOutput(prompt=p if isinstance(p, str) else None, prompt_token_ids=[], token_ids=[],
                                      text="", finish_reason="length")
                   for rid, p in zip(ids, prompts)}
        if self.startup_report.phases["first_token"] is None:
            self.startup_report.skip()  # the first-token phase starts with the first request
        for rid, pids, p in zip(ids, prompt_ids, params):
            self.engine.add_request(rid, pids, p)
        pending = set(ids)
        while pending:
            for out in self.engine.step():
                result = results.get(out.request_id)
                if result is None:
                    continue
                if out.token_ids and self.startup_report.phases["first_token"] is None:
                    self.startup_report.mark("first_token")
                    self.runner.kernel_cache.record("first_token")
                    self.startup_report.log()
                result.token_ids.extend(out.token_ids)
                result.text += out.text
                if out.logprobs is not None:
                    result.logprobs = (result.logprobs or []) + out.logprobs
                if out.prompt_logprobs is not None:
                    result.prompt_logprobs = out.prompt_logprobs
                if out.finished:
                    result.finish_reason, result.stop_reason = out.finish_reason, out.stop_reason
                    pending.discard(out.request_id)
        for rid, pids in zip(ids, prompt_ids):
            results[rid].prompt_token_ids = list(pids)
        return [results[rid] for rid in ids]

    def chat(self, messages: Sequence[dict], sampling_params: SamplingParams | None = None) -> RequestOutput:
        """Render a conversation with the model's chat format (harmony for gpt-oss) and complete it; the text
        keeps the format's special tokens (tokenizer.parse_chat_completion splits it into channels)."""
        params = sampling_params or SamplingParams()
        stop = tuple(params.stop_token_ids) + tuple(self.tokenizer.chat_stop_token_ids)
        params = dataclasses.replace(params, stop_token_ids=stop, skip_special_tokens=False)
        return self.generate([self.tokenizer.render_chat(list(messages))], params)[0]
