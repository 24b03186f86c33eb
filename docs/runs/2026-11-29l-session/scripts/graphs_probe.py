import gc, sys, time, torch
import quickmoe.distributed.env as E
orig = E.close_parallel
def patched():
    from quickmoe.executor.model_runner import ModelRunner
    n = 0
    if "--release" in sys.argv:
        for o in gc.get_objects():
            if isinstance(o, ModelRunner) and o.graphs is not None:
                o.graphs = None; n += 1
        gc.collect(); torch.cuda.synchronize()
    t = time.perf_counter(); print(f"rank close: released {n} runners' graphs", flush=True)
    orig(); print(f"destroy took {time.perf_counter()-t:.2f} s", flush=True)
E.close_parallel = patched
from quickmoe import LLM, SamplingParams
llm = LLM(sys.argv[1], tensor_parallel_size=2)
out = llm.generate([[100 + i for i in range(90)]] * 8, SamplingParams(max_tokens=16, temperature=0))
print("generated", len(out), flush=True)
llm.shutdown(); print("shutdown returned", flush=True)
