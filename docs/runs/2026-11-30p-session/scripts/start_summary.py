"""Summarise --startup-json reports of `quickmoe generate --compile on` runs: one line each, then medians by mode."""
import json, statistics, sys, collections
rows = collections.defaultdict(list)
for path in sys.argv[1:]:
    mode = path.split('/')[-1].split('_')[1].removesuffix('.json')
    d = json.load(open(path))
    ph, c = d["phases"], d.get("info", {}).get("compile", {})
    r = dict(load=ph.get("load") or 0, process=ph.get("process") or 0, compile=ph.get("compile") or 0,
             capture=ph.get("capture") or 0, total=d["total"], imports=c.get("imports_s") or 0,
             thread=c.get("imports_thread_s") or 0, dynamo=c.get("dynamo_s") or 0, backend=c.get("backend_s") or 0,
             warmup=c.get("warmup_s") or 0, hits=c.get("cache_hits"), misses=c.get("cache_misses"))
    rows[mode].append(r)
    print(path.split('/')[-1], " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
print("medians by mode (s):")
keys = ("load", "process", "compile", "imports", "thread", "dynamo", "backend", "warmup", "capture", "total")
print("mode n " + " ".join(keys))
for mode, rs in rows.items():
    print(mode, len(rs), " ".join(f"{statistics.median(r[k] for r in rs):.3f}" for k in keys))
