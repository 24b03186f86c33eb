"""Median compile-phase parts of --startup-json files per tree (call scripts' helper): argv = files named *_TREE_N.json."""
import json, statistics, sys
from collections import defaultdict
rows = defaultdict(list)
for path in sys.argv[1:]:
    tree = path.rsplit("/", 1)[-1].split("_")[1]
    d = json.load(open(path))
    c = d["info"].get("compile", {})
    ph = d["phases"]
    rows[tree].append({"compile": ph.get("compile") or 0, "imports": c.get("imports_s", 0), "dynamo": c.get("dynamo_s", 0),
                       "backend": c.get("backend_s", 0), "warmup": c.get("warmup_s", 0), "graphs": c.get("graphs", 0),
                       "rest": (ph.get("compile") or 0) - c.get("imports_s", 0),
                       "total": sum(v for v in ph.values() if v), "load": ph.get("load") or 0, "capture": ph.get("capture") or 0})
for tree, runs in rows.items():
    keys = runs[0].keys()
    print(tree, f"n={len(runs)}", " ".join(f"{k}={statistics.median(r[k] for r in runs):.3f}" for k in keys))
    print(tree, "compile each:", [round(r["compile"], 3) for r in runs], "rest:", [round(r["rest"], 3) for r in runs])
