"""The offline Python API: `LLM(DIR).generate(prompts, SamplingParams(...))`.

A simple batched generate loop over a contiguous KV cache: all prompts of a group are prefilled in
one packed step, then decoded together until each stops. (Continuous batching over a paged cache is
the engine of a later issue; this API will sit on top of it unchanged.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

from quickmoe.config import EngineConfig
from quickmoe.errors import RequestError
from quickmoe.layers.sampler import Sampler
from quickmoe.runtime.forward_batch import ForwardBatch
from quickmoe.runtime.early_start import EarlyStart
from quickmoe.runtime.model_runner import ModelRunner
from quickmoe.runtime.sampling_params import SamplingParams
from quickmoe.runtime.startup import StartupReport
from quickmoe.tokenizer import load_tokenizer

logger = logging.getLogger(__name__)

Prompt = str | Sequence[int]


@dataclass
class RequestOutput:
    """The result of one prompt. finish_reason: 'stop' (EOS or a stop token) or 'length'."""

    prompt: str | None
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: str


@dataclass
class _Sequence:
    prompt_ids: list[int]
    params: SamplingParams
    generator: torch.Generator | None
    stop_ids: frozenset[int]
    output_ids: list[int]
    finish_reason: str | None = None


class LLM:
    """A gpt-oss model ready to generate. `model` is a checkpoint directory; None uses the embedded
    default (a tiny random checkpoint built once into the cache: its text is meaningless).
    `early_start`: background start-up work begun before torch was imported (`EarlyStart.begin`)."""

    def __init__(self, model: str | Path | None = None, *, device: str = "auto", dtype: str = "auto",
                 max_model_len: int | None = None, max_num_seqs: int = 64,
                 startup_report: StartupReport | None = None, progress: bool = False,
                 early_start: EarlyStart | None = None, moe_kernels: str = "auto",
                 compile: str = "off") -> None:
        self.engine_config = EngineConfig(model=None if model is None else str(model), device=device, dtype=dtype,
                                          max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                                          moe_kernels=moe_kernels, compile=compile)
        self.startup_report = startup_report if startup_report is not None else StartupReport()
        if model is None:
            from quickmoe.checkpoint.default_model import ensure_default_model

            t0 = time.perf_counter()
            model = ensure_default_model()
            self.startup_report.info["default_model_s"] = time.perf_counter() - t0
            self.startup_report.skip()  # building the default model once is not part of a start-up
        self.model_dir = Path(model)
        # The tokenizer loads on a thread: the early start's (begun during the imports), else one started now
        # beside the weights. The `tokenizer` phase is what is left to wait for after the weights.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="quickmoe-tokenizer") as pool:
            tokenizer = (early_start.tokenizer if early_start is not None and early_start.tokenizer is not None
                         else pool.submit(load_tokenizer, self.model_dir))
            self.runner = ModelRunner(self.model_dir, self.engine_config, self.startup_report, progress=progress,
                                      early_start=early_start)
            self.tokenizer = tokenizer.result()
        self.config = self.runner.config
        self.startup_report.mark("tokenizer")
        self.max_model_len = max_model_len or self.config.max_position_embeddings
        self.sampler = Sampler()

    # -- inputs -----------------------------------------------------------------------------------
    def _prompt_ids(self, prompt: Prompt, index: int) -> list[int]:
        ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else [int(t) for t in prompt]
        if not ids:
            raise RequestError(f"prompt {index}: empty (expected at least one token)")
        bad = [t for t in ids if not 0 <= t < self.config.vocab_size]
        if bad:
            raise RequestError(f"prompt {index}: token id {bad[0]} is outside the model's vocabulary "
                               f"[0, {self.config.vocab_size})")
        if len(ids) >= self.max_model_len:
            raise RequestError(f"prompt {index}: {len(ids)} tokens leave no room to generate within "
                               f"max_model_len={self.max_model_len}")
        return ids

    def _stop_ids(self, params: SamplingParams) -> frozenset[int]:
        # config.json names one EOS id; generation_config.json (read by the tokenizer) may name several
        eos = set() if params.ignore_eos else set(self.config.eos_token_ids) | set(self.tokenizer.eos_token_ids)
        return frozenset(eos) | frozenset(params.stop_token_ids)

    # -- generation -------------------------------------------------------------------------------
    def generate(self, prompts: Prompt | Sequence[Prompt],
                 sampling_params: SamplingParams | Sequence[SamplingParams] | None = None) -> list[RequestOutput]:
        """Generate for each prompt (text, or a list of token ids). One SamplingParams for all, or one each."""
        if isinstance(prompts, str) or (isinstance(prompts, Sequence) and prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        prompts = list(prompts)
        if sampling_params is None:
            sampling_params = SamplingParams()
        params = [sampling_params] * len(prompts) if isinstance(sampling_params, SamplingParams) \
            else list(sampling_params)
        if len(params) != len(prompts):
            raise RequestError(f"got {len(params)} SamplingParams for {len(prompts)} prompts (expected one or "
                               "one per prompt)")
        seqs = []
        for i, (prompt, p) in enumerate(zip(prompts, params)):
            gen = None
            if not p.greedy:
                gen = torch.Generator().manual_seed(p.seed if p.seed is not None else
                                                    int(torch.randint(0, 2**62, ()).item()))
            seqs.append(_Sequence(self._prompt_ids(prompt, i), p, gen, self._stop_ids(p), []))
        if self.startup_report.phases["first_token"] is None:
            self.startup_report.skip()  # the first-token phase starts with the first request
        step = self.engine_config.max_num_seqs
        for start in range(0, len(seqs), step):
            self._run_group(seqs[start:start + step])
        return [RequestOutput(prompt=prompt if isinstance(prompt, str) else None, prompt_token_ids=s.prompt_ids,
                              token_ids=s.output_ids, text=self.tokenizer.decode(s.output_ids),
                              finish_reason=s.finish_reason or "length")
                for prompt, s in zip(prompts, seqs)]

    def chat(self, messages: Sequence[dict], sampling_params: SamplingParams | None = None) -> RequestOutput:
        """Render a conversation with the model's chat format (harmony for gpt-oss) and complete it."""
        params = sampling_params or SamplingParams()
        stop = tuple(params.stop_token_ids) + tuple(self.tokenizer.chat_stop_token_ids)
        params = SamplingParams(max_tokens=params.max_tokens, temperature=params.temperature, top_p=params.top_p,
                                seed=params.seed, stop_token_ids=stop, ignore_eos=params.ignore_eos)
        return self.generate([self.tokenizer.render_chat(list(messages))], params)[0]

    def _run_group(self, seqs: list[_Sequence]) -> None:
        """Prefill every sequence of the group in one packed step, then decode them together."""
        max_len = min(self.max_model_len, max(len(s.prompt_ids) + s.params.max_tokens for s in seqs))
        cache = self.runner.new_kv_cache(len(seqs), max_len)
        slots = list(range(len(seqs)))
        batch = ForwardBatch.build([s.prompt_ids for s in seqs], [0] * len(seqs), slots, cache, self.runner.device)
        active = list(slots)
        while active:
            logits = self.runner.forward(batch)  # [B, V]
            tokens = self.sampler(logits, [seqs[i].params for i in active], [seqs[i].generator for i in active])
            if self.startup_report.phases["first_token"] is None:
                self.startup_report.mark("first_token")
                self.startup_report.log()
            still = []
            for i, tok in zip(active, tokens):
                s = seqs[i]
                s.output_ids.append(tok)
                if tok in s.stop_ids:
                    s.finish_reason = "stop"
                elif len(s.output_ids) >= s.params.max_tokens or len(s.prompt_ids) + len(s.output_ids) >= max_len:
                    s.finish_reason = "length"
                else:
                    still.append(i)
            active = still
            if active:
                batch = ForwardBatch.build([[seqs[i].output_ids[-1]] for i in active],
                                           [len(seqs[i].prompt_ids) + len(seqs[i].output_ids) - 1 for i in active],
                                           active, cache, self.runner.device)
