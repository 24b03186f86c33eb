"""torch.compile's AOT compile (`torch.compile(...).aot_compile`, torch >= 2.10) of one decoder layer: save, then load
in a fresh process, to see what a warm start would cost without Dynamo's tracing (issue 16's warm compile phase).

`save` builds the model on the CPU (compile off), captures layer 0's arguments in a 2-token generate, AOT-compiles
`DecoderLayer.forward` with the process-wide settings of executor/compile.py and writes the artifact; `load` (a
fresh process) loads it, calls it on the same arguments, and prints the load's seconds, whether Inductor's compiler
was imported, and whether the result equals the eager layer. The guards are rebuilt at the load with the thread's
state then: loaded outside inference mode, a dispatch-key guard refuses the runner's inference-mode calls;
`--load-in-inference-mode` loads it in the state the runner calls in (the guards then pass), `--no-guards` calls it
with its guards off (docs/benchmarks.md, Cold start II, 2026-11-27).

`check` loads it and asks its guards about layers 0 (the traced kind) and 1 (the other kind) at each step of a
2-prompt generate.

    python scripts/probes/aot_compile_probe.py save && python -X importtime scripts/probes/aot_compile_probe.py load
"""

from __future__ import annotations

import argparse
import sys
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("save", "load", "check"))
    parser.add_argument("--model", default="src/quickmoe/checkpoint/embedded")
    parser.add_argument("--path", default="/tmp/quickmoe_aot_layer.bin")
    parser.add_argument("--no-guards", action="store_true")
    parser.add_argument("--load-in-inference-mode", action="store_true",
                        help="load under torch.inference_mode(), the state the runner calls the layers in")
    args = parser.parse_args()
    import torch._dynamo.config as dynamo_config
    import torch.fx.experimental._config as fx_config

    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM
    from quickmoe.models.decoder import DecoderLayer

    fx_config.backed_size_oblivious = True  # as compile_decoder_layers sets them
    fx_config.use_duck_shape = False
    dynamo_config.specialize_float = True
    llm = LLM(args.model, device="cpu", dtype="float32")
    if args.mode == "check":
        check_guards(llm, args.path)
        return
    layer = llm.runner.model.model.layers[0]
    captured = []
    hook = layer.register_forward_pre_hook(lambda mod, a, kw: captured.append((a, kw)) if not captured else None,
                                           with_kwargs=True)
    llm.generate([[5, 17, 300, 42, 7]], SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True))
    hook.remove()
    call_args, call_kwargs = captured[0]
    with torch.inference_mode():
        want = layer(*call_args, **call_kwargs)
    if args.mode == "save":
        t0 = time.perf_counter()
        compiled = torch.compile(DecoderLayer.forward, fullgraph=True, dynamic=True)
        with torch.inference_mode():
            aot = compiled.aot_compile(((layer, *call_args), call_kwargs))
        aot.save_compiled_function(args.path)
        print(f"aot_compile and save: {time.perf_counter() - t0:.2f} s -> {args.path}")
        aot.disable_guard_check()
    else:
        t0 = time.perf_counter()
        with open(args.path, "rb") as f, torch.inference_mode(args.load_in_inference_mode):
            aot = torch.compiler.load_compiled_function(f)
        print(f"load: {time.perf_counter() - t0:.2f} s; Inductor's compiler imported: "
              f"{'torch._inductor.compile_fx' in sys.modules}")
        if args.no_guards:
            aot.disable_guard_check()
    t1 = time.perf_counter()
    with torch.inference_mode():
        got = aot(layer, *call_args, **call_kwargs)
    print(f"first call: {time.perf_counter() - t1:.3f} s; equal to eager (atol 1e-5): "
          f"{all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want))}")


def check_guards(llm, path: str) -> None:
    """The saved artifact (traced on layer 0), loaded under inference mode, against the arguments of layers 0 and 1
    at every step of a 2-prompt generate: which calls its guards accept, and their results against eager."""
    from quickmoe.engine.sampling_params import SamplingParams

    layers = llm.runner.model.model.layers
    calls = {0: [], 1: []}
    hooks = [layers[i].register_forward_pre_hook(lambda m, a, kw, i=i: calls[i].append((a, kw)), with_kwargs=True)
             for i in calls]
    llm.generate([[5, 17, 300, 42, 7], [9, 8]], SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True))
    for hook in hooks:
        hook.remove()
    with open(path, "rb") as f, torch.inference_mode():
        aot = torch.compiler.load_compiled_function(f)
    with torch.inference_mode():
        for i, layer_calls in calls.items():
            for n, (a, kw) in enumerate(layer_calls):
                ok = aot.guard_check(layers[i], *a, **kw)
                line = f"layer {i} step {n}: {a[0].shape[0]} tokens, guards pass: {ok}"
                if ok:
                    same = all(torch.allclose(x, y, atol=1e-5) for x, y in zip(aot(layers[i], *a, **kw),
                                                                                 layers[i](*a, **kw)))
                    line += f", equal to eager: {same}"
                print(line)


if __name__ == "__main__":
    main()
