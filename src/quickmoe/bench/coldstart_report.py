"""The table `quickmoe bench coldstart` prints: min and median per phase and series, then one line each on GPU
memory, the early start, the decode CUDA graphs captured at start-up, the Triton kernel cache, the load rate, the
PermutationCache and compile ratios, weights_ready against a bare `import torch`, and transformers against quickmoe."""

from __future__ import annotations

import statistics

__all__ = ["format_table"]

_TOKENIZER_KINDS = {"HFTokenizer": "tokenizer.json through `tokenizers`",
                    "O200kHarmonyTokenizer": "tokenizer.json recognised as o200k_harmony"}


def _early_start_line(infos: list[dict]) -> str:
    """One line on the background start-up work (medians over the runs)."""
    parts = []
    pre = [i["cuda_preinit"] for i in infos if "cuda_preinit" in i]
    if pre and all(p["ok"] for p in pre):
        parts.append(f"CUDA context {statistics.median(p['context_seconds'] for p in pre):.2f} s + page-locked ring "
                     f"{statistics.median(p['host_buffer_seconds'] for p in pre):.2f} s on a thread during imports")
    elif pre:
        parts.append(f"CUDA pre-initialisation failed ({pre[0]['error']})")
    tok = [i["tokenizer"] for i in infos if "tokenizer" in i]
    if tok:
        kinds = sorted({_TOKENIZER_KINDS.get(t.get("kind"), str(t.get("kind"))) for t in tok})
        parts.append(f"tokenizer {statistics.median(t['seconds'] for t in tok):.2f} s on a thread during imports "
                     f"(holding the GIL; {' / '.join(kinds)})")
    fetch = [i["prefetch"] for i in infos if "prefetch" in i]
    if fetch:
        parts.append(f"page-cache prefetch read {statistics.median(f['read_bytes'] for f in fetch) / 1e9:.2f} GB "
                     f"from disk, found {statistics.median(f['resident_bytes'] for f in fetch) / 1e9:.2f} GB cached")
    return "early start: " + ("; ".join(parts) if parts else "off")


def _graphs_line(infos: list[dict]) -> str | None:
    """One line on the decode CUDA graphs captured at start-up (medians over the runs), or None without graphs."""
    graphs = [i["cuda_graphs"] for i in infos if "cuda_graphs" in i]
    if not graphs:
        return None
    startup = [[c for c in g["captures"] if c["when"] == "startup"] for g in graphs]
    warmup = statistics.median(sum(c["warmup_s"] for c in s) for s in startup)
    capture = statistics.median(sum(c["capture_s"] for c in s) for s in startup)
    deferred = graphs[0]["deferred"]
    return (f"decode CUDA graphs: batch sizes {graphs[0]['startup_batch_sizes']} captured at start-up in "
            f"{statistics.median(g['seconds'] for g in graphs):.3f} s (warm-ups {warmup:.3f} s, captures "
            f"{capture:.3f} s); " + (f"{deferred} when first needed or while idle" if deferred else "none left"))


def _kernel_cache_line(infos: list[dict]) -> str | None:
    """One line on the Triton kernel cache: entries compiled at start-up and for the first token (medians)."""
    caches = [i["triton_cache"] for i in infos if "triton_cache" in i]
    if not caches:
        return None
    line = (f"Triton kernel cache ({caches[0]['source']}): {statistics.median(c['entries'] for c in caches):.0f} "
            f"entries found, {statistics.median(c.get('new_entries_startup', 0) for c in caches):.0f} compiled at "
            "start-up")
    firsts = [c["new_entries_first_token"] for c in caches if "new_entries_first_token" in c]
    line += (f", {statistics.median(firsts):.0f} for the first token" if firsts else "") + " (medians)"
    keys = [c["triton_key"] for c in caches if c.get("triton_key", "off") != "off"]  # executor/triton_key.py
    if keys:
        line += f"; Triton's version key read from the cache in {keys.count('cached')} of {len(caches)} runs"
    return line


def _precompile_line(infos: list[dict]) -> str | None:
    """One line on the kernel precompile of runs that compiled (executor/kernel_precompile.py): kernels recorded,
    compiled ahead in worker processes and how long it took (medians); None when every run found its manifest."""
    runs = [i["precompile"] for i in infos if "missing" in i.get("precompile", {})]
    if not runs:
        return None
    med = lambda key: statistics.median(r.get(key, 0) for r in runs)  # noqa: E731
    line = (f"kernel precompile: {med('kernels'):.0f} kernels recorded, {med('missing'):.0f} not in the cache, "
            f"{med('compiled'):.0f} compiled ahead")
    if med("missing"):
        line += (f" in {med('compile_s'):.2f} s by {med('workers'):.0f} worker processes ({med('worker_seconds'):.1f} s "
                 "of compiling)")
    failed = med("failed")
    line += (f", {failed:.0f} failed (compiled at their first launch)" if failed else "") + " (medians)"
    slowest = runs[0].get("slowest")  # longest compiles first (kernel_precompile._LONGEST_FIRST hands such out first)
    return line + (f"; slowest to compile in the first run: {', '.join(slowest)}" if slowest else "")


def format_table(doc: dict) -> str:
    summary = doc["summary"]
    columns = list(summary)
    labels = {"quickmoe": "quickmoe", "cold_kernels": "empty kernels", "quickmoe_uncached": "no-perm-cache",
              "compiled_cold": "compile cold", "compiled_warm": "compile warm", "compiled_compare": "fewer layers", "transformers": "transformers"}
    phases = list(dict.fromkeys(p for s in summary.values() for p in s))
    phases = [p for p in phases if p not in ("weights_ready", "total")] + ["weights_ready", "total"]
    head = f"{'phase':<16}" + "".join(f"{labels[c] + ' min':>22}{'median':>12}" for c in columns)
    lines = [f"cold start of {doc['model']} ({doc['runs']} runs each, page cache {doc['page_cache']}, "
             f"device {doc['device']}, {doc['dtype']})", head]
    for p in phases:
        row = f"{p:<16}"
        for c in columns:
            lo, med = summary[c].get(p, (None, None))
            row += f"{'-':>22}{'-':>12}" if lo is None else f"{lo:>20.3f} s{med:>10.3f} s"
        lines.append(row)
    reports = doc.get("reports", {}).get("quickmoe", [])
    if reports and "gpu_peak_bytes_during_process" in reports[0].get("info", {}):
        i = reports[0]["info"]
        lines.append(f"GPU memory: after load {i['gpu_bytes_after_load'] / 2**30:.2f} GiB, peak during processing "
                     f"{i['gpu_peak_bytes_during_process'] / 2**30:.2f} GiB, after {i['gpu_bytes_after_process'] / 2**30:.2f}"
                     f" GiB; peak host RSS {i['peak_host_rss_bytes'] / 2**30:.2f} GiB" + (
                         f"; KV cache {i['kv_cache']['bytes'] / 2**30:.2f} GiB (max_model_len "
                         f"{i['kv_cache']['max_model_len']})" if "kv_cache" in i else ""))
    early = [r["info"]["early_start"] for r in reports if "early_start" in r.get("info", {})]
    if early:
        lines.append(_early_start_line(early))
    infos = [r.get("info", {}) for r in reports]
    lines.extend(line for line in (_graphs_line(infos), _kernel_cache_line(infos)) if line)
    cold = [r.get("info", {}) for r in doc.get("reports", {}).get("cold_kernels", [])]
    if cold and _kernel_cache_line(cold):
        lines.append("empty kernel cache: " + _kernel_cache_line(cold))
    for series, label in (("quickmoe", ""), ("cold_kernels", "empty kernel cache: "),
                          ("compiled_cold", "compile, fresh caches: ")):
        line = _precompile_line([r.get("info", {}) for r in doc.get("reports", {}).get(series, [])])
        if line:
            lines.append(label + line)
    if reports and "permutation_cache" in reports[0].get("info", {}):
        c = reports[0]["info"]["permutation_cache"]
        lines.append(f"PermutationCache: {c.get('misses')} misses (distinct keys), {c.get('hits')} hits, "
                     f"{c.get('index_bytes', 0) / 2**20:.1f} MiB of indices")
    if doc.get("load_bytes") and "load" in summary["quickmoe"]:
        rate = doc["load_bytes"] / 1e9 / summary["quickmoe"]["load"][1]
        streams = [r["info"]["loader"]["seconds"] for r in reports if "seconds" in r.get("info", {}).get("loader", {})]
        stream_rate = doc["load_bytes"] / 1e9 / statistics.median(streams) if streams else None
        h2d = doc.get("pinned_h2d_gb_per_s")
        line = f"read + host->device: {rate:.1f} GB/s over the load phase" + (f" ({100 * rate / h2d:.0f}%)" if h2d else "")
        if stream_rate:
            line += f", {stream_rate:.1f} GB/s over the streaming itself" + (
                f" ({100 * stream_rate / h2d:.0f}%)" if h2d else "")
        if h2d:
            line += f"; pinned host->device measured now: {h2d:.1f} GB/s"
        loader = next((r["info"]["loader"] for r in reports if r.get("info", {}).get("loader", {}).get("copy_calls")),
                      None)
        if loader:  # the direct copies and the driver calls that queued them (batched: transfer.MAX_BATCH a call)
            line += (f" (medians); {loader['direct_copies']:,} tensor pieces copied straight into their parameters "
                     f"in {loader['copy_calls']:,} driver calls")
            planned = [bool(r["info"]["loader"].get("plan_cached")) for r in reports if "loader" in r.get("info", {})]
            if any(planned):  # checkpoint/load_plan.py
                line += f"; {sum(planned)} of {len(planned)} runs streamed from a cached load plan"
        lines.append(line if loader else line + " (medians)")
    if "quickmoe_uncached" in summary and "process" in summary["quickmoe"]:
        cached, uncached = summary["quickmoe"]["process"][1], summary["quickmoe_uncached"]["process"][1]
        lines.append(f"weight processing, PermutationCache off / on (medians): {uncached:.3f} s / {cached:.3f} s = "
                     f"{uncached / max(cached, 1e-9):.1f}x")
    compare = doc.get("compile_compare")
    if compare and "compile" in summary.get("compiled_compare", {}) and "compile" in summary.get("compiled_cold", {}):
        deep, shallow = summary["compiled_cold"]["compile"][1], summary["compiled_compare"]["compile"][1]
        lines.append(f"compile phase with fresh caches (medians): {compare['model_layers']} layers {deep:.2f} s, "
                     f"{compare['layers']} layers {shallow:.2f} s = {deep / max(shallow, 1e-9):.2f}x")
    if doc.get("import_torch_s") and "weights_ready" in summary["quickmoe"]:
        floor = doc["import_torch_s"]
        ready = summary["quickmoe"]["weights_ready"][1]
        lines.append(f"import torch alone, fresh processes with the same environment and bytecode cache: min "
                     f"{min(floor):.3f} s, median {statistics.median(floor):.3f} s; weights_ready adds "
                     f"{ready - statistics.median(floor):+.3f} s to it (medians)")
    if "transformers" in summary:
        ratio = summary["transformers"]["total"][1] / max(summary["quickmoe"]["total"][1], 1e-9)
        lines.append(f"process start -> first token, transformers / quickmoe (medians): {ratio:.2f}x")
    return "\n".join(lines)
