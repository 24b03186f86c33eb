"""Time a full collector pass over the frozen heap mid-run: the embedded model on the CPU, N requests of P prompt
tokens, S steps, then gc.collect() timed (min of 5) and the tracked objects' list elements counted."""
import gc, random, sys, time
from quickmoe.llm import LLM
from quickmoe.engine.sampling_params import SamplingParams
N, P, S = (int(a) for a in sys.argv[1:4])
llm = LLM(None, device="cpu", max_model_len=P + 400, max_num_seqs=N)
eng = llm.engine
while eng.idle_work():
    pass
gc.collect(); gc.freeze()
random.seed(0)
for i in range(N):
    eng.add_request(f"r{i}", [random.randrange(100, 4000) for _ in range(P)],
                    SamplingParams(max_tokens=300, temperature=0, ignore_eos=True))
for _ in range(S):
    eng.step()
ts = []
for _ in range(5):
    t0 = time.perf_counter(); gc.collect(); ts.append(time.perf_counter() - t0)
objs = gc.get_objects()
elements = sum(len(o) for o in objs if isinstance(o, (list, dict, tuple, set)))
print(f"N {N} P {P} steps {S}: full pass {min(ts) * 1e3:.2f} ms; tracked {len(objs)}, container elements {elements}")
