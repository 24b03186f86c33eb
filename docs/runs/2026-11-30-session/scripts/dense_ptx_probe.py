import os, sys, re, importlib.util
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.backends.compiler import GPUTarget
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m; spec.loader.exec_module(m); return m
new = load("src/quickmoe/kernels/dense_gemm.py", "newdg")
base = load(".ab/base_dense_gemm.py", "basedg")
def compile_(mod, bm, bn, bk, warps, stages, swap, split, parts=4, kpart=1024):
    k = mod._dense_gemm_kernel
    names = list(k.arg_names)
    sig = {"x_ptr": "*bf16", "w_ptr": "*bf16", "bias_ptr": "*bf16", "out_ptr": "*bf16", "partial_ptr": "*fp32",
           "counter_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32", "stride_x": "i32", "stride_w": "i32"}
    sig = {n: sig[n] for n in names if n in sig}
    ce = dict(HAS_BIAS=True, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SWAP=swap, GROUP_M=8, FP32_DOT=False, PDL=True)
    if "PARTS" in names: ce.update(PARTS=parts, K_PART=kpart, SPLIT=split)
    sig.update({n: "constexpr" for n in ce})
    aligned = [n for n in sig if sig[n].startswith("*")] + ["N", "K", "stride_x", "stride_w"]
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    src = triton.compiler.ASTSource(fn=k, signature=sig, constexprs=ce, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
for label, mod, split in (("base", base, False), ("new", new, False), ("new-split", new, True)):
    for cfg in ((128, 64, 128, 4, 4, True), (64, 64, 128, 4, 4, True), (16, 64, 128, 4, 4, True)):
        if label == "base" and False: pass
        c = compile_(mod, *cfg, split=split)
        ptx = c.asm["ptx"]
        print(label, cfg, "smem", c.metadata.shared,
              "wgmma", ptx.count("wgmma.mma_async"), "wait_group", sorted(set(re.findall(r"wgmma.wait_group.sync.aligned (\d+)", ptx))),
              "cp.async", ptx.count("cp.async.ca") + ptx.count("cp.async.cg"), "bulk", ptx.count("cp.async.bulk"), "mbarrier", ptx.count("mbarrier"))
