"""One line per compiled run of a bench coldstart JSON: phases and info.compile's parts (call scripts' helper)."""
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    for series in ("compiled_cold", "compiled_warm"):
        for r in d.get("reports", {}).get(series, []):
            c = r.get("info", {}).get("compile", {})
            ph = r.get("phases", {})
            parts = " ".join(f"{k}={c.get(k) if not isinstance(c.get(k), float) else round(c.get(k), 3)}"
                             for k in ("imports_s", "imports_thread_s", "dynamo_s", "backend_s", "codegen_s",
                                       "warmup_s", "workers", "cache_hits", "cache_misses"))
            print(f"{path.split('/')[-1]} {series}: compile {ph.get('compile'):.3f} precompile "
                  f"{ph.get('precompile') or 0:.3f} load {ph.get('load'):.3f} process {ph.get('process'):.3f} "
                  f"total {r.get('total'):.3f} | {parts}")
