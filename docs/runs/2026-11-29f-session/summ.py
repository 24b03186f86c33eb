"""Summary table of bench coldstart JSONs: python3 summ.py FILES..."""
import json, statistics, sys, os
def find(o, key, acc):
    if isinstance(o, dict):
        for k, v in o.items():
            find(v, key, acc) if k != key else acc.append(v)
    elif isinstance(o, list):
        for v in o:
            find(v, key, acc)
    return acc
med = lambda xs: statistics.median(xs) if xs else float("nan")
print(f"{'run':34s} {'imports':>7s} {'build':>6s} {'load':>6s} {'proc':>6s} {'w_ready':>7s} {'total':>6s} {'torch':>6s} {'+over':>6s} {'triton':>6s} {'tables':>6s}")
for f in sys.argv[1:]:
    try:
        d = json.load(open(f))
    except (OSError, ValueError) as e:
        print(os.path.basename(f), "unreadable", e); continue
    s = d["summary"]["quickmoe"]
    m = {k: v[1] for k, v in s.items() if v}
    tor = med(d.get("import_torch_s") or [])
    tri = med([v for v in find(d, "triton_start_seconds", []) if isinstance(v, (int, float))])
    tab = med([v for v in find(d, "tables_start_seconds", []) if isinstance(v, (int, float))])
    name = os.path.basename(f)[:-5]
    print(f"{name:34s} {m.get('imports',0):7.3f} {m.get('build',0):6.3f} {m.get('load',0):6.3f} {m.get('process',0):6.3f} "
          f"{m.get('weights_ready',0):7.3f} {m.get('total',0):6.3f} {tor:6.3f} {m.get('weights_ready',0)-tor:6.3f} {tri:6.3f} {tab:6.3f}")
