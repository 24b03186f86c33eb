"""From the sweep JSONs: the fastest (block_m, GEMM 1, GEMM 2) pair at T; writes it at key KEY of the gpt-oss-20b
H200 files under a copy tree ROOT/src. python3 pick256.py ROOT KEY sweep1.json [sweep2.json ...]"""
import json, sys
root, key, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
best = {}
tuned = {}
for p in paths:
    for r in json.load(open(p)):
        t = r["timed"][0]
        bm, g = r["block_m"], r["gemm"]
        if r["tuned_us"] is not None:
            tuned[g] = r["tuned_us"]
        if (bm, g) not in best or t["us"] < best[bm, g]["us"]:
            best[bm, g] = t
pairs = [(best[bm, 1]["us"] + best[bm, 2]["us"], bm) for bm in {b for b, _ in best} if (bm, 2) in best and (bm, 1) in best]
total, bm = min(pairs)
print(f"tuned: GEMM 1 {tuned.get(1)} us, GEMM 2 {tuned.get(2)} us; best pair block_m {bm}: {total:.1f} us "
      f"(GEMM 1 {best[bm, 1]}, GEMM 2 {best[bm, 2]}); all: {sorted(pairs)}")
d = "/src/quickmoe/kernels/configs/"
for g, f in ((1, "E32_N5760_K2880_mxfp4_NVIDIA_H200.json"), (2, "E32_N2880_K2880_mxfp4_NVIDIA_H200.json")):
    path = root + d + f
    table = json.load(open(path))
    c = {k: v for k, v in best[bm, g].items() if k != "us"}
    entry = {"block_m": bm, "block_n": c["block_n"], "block_k": c["block_k"], "num_warps": c["num_warps"],
             "num_stages": c["num_stages"], "swap_ab": bool(c["swap_ab"]), "group_m": c["group_m"]}
    if g == 1:
        entry["gate_up_one_dot"] = bool(c["gate_up_one_dot"])
    print(f"{f} key {key}: {table.get(key)} -> {entry}")
    table[key] = entry
    json.dump(table, open(path, "w"), indent=1)
