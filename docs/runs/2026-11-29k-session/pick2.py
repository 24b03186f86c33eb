"""Call 7: if a sweep point beats the committed key-256 entry of a GEMM by >= 4% alone, write it into ROOT's copy of
the gpt-oss-20b H200 files (same block_m, so the pair keeps one alignment) and print CHANGED; else print SAME."""
import json, sys
root, paths = sys.argv[1], sys.argv[2:]
files = {1: "E32_N5760_K2880_mxfp4_NVIDIA_H200.json", 2: "E32_N2880_K2880_mxfp4_NVIDIA_H200.json"}
changed = False
for p in paths:
    for r in json.load(open(p)):
        g, best, tuned = r["gemm"], r["timed"][0], r["tuned_us"]
        print(f"GEMM {g} block_m {r['block_m']}: tuned {tuned:.1f} us, best {best}")
        if r["block_m"] == 64 and tuned and best["us"] < 0.96 * tuned:
            path = f"{root}/src/quickmoe/kernels/configs/{files[g]}"
            table = json.load(open(path))
            entry = dict(table["256"], block_n=best["block_n"], block_k=best["block_k"], num_warps=best["num_warps"],
                         num_stages=best["num_stages"], swap_ab=bool(best["swap_ab"]), group_m=best["group_m"])
            if g == 1:
                entry["gate_up_one_dot"] = bool(best["gate_up_one_dot"])
            print(f"  -> {files[g]} key 256: {table['256']} -> {entry}")
            table["256"] = entry
            json.dump(table, open(path, "w"), indent=1)
            changed = True
print("CHANGED" if changed else "SAME")
