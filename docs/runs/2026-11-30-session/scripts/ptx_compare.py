import os, sys, re, importlib.util
os.environ.pop("TRITON_INTERPRET", None)
sys.argv = sys.argv[:1]
exec(open('/tmp/dense_ptx.py').read().split("for label, mod, split in")[0])
measured = load("/tmp/dg_flat.py", "measured")
for cfg, split in (((16, 64, 128, 4, 4, True), True), ((32, 64, 128, 4, 3, True), True), ((64, 64, 128, 4, 4, True), False), ((64, 64, 128, 4, 3, True), False)):
    a = compile_(measured, *cfg, split=split).asm["ptx"]; b = compile_(new, *cfg, split=split).asm["ptx"]
    norm = lambda t: re.sub(r"^\$L__tmp\d+:$|\.loc.*|\.file.*|//.*|_dense_gemm_kernel|\$L__tmp\w+", "", t.split(".section\t.debug")[0].split(".section .debug")[0], flags=re.M)
    ia = [l for l in norm(a).splitlines() if l.strip()]; ib = [l for l in norm(b).splitlines() if l.strip()]
    print(cfg, split, "lines", len(ia), len(ib), ("identical" if ia == ib else "same multiset") if sorted(ia) == sorted(ib) else "DIFFERENT")
import difflib
cfg=(64, 64, 128, 4, 3, True)
a = compile_(measured, *cfg, split=False).asm["ptx"]; b = compile_(new, *cfg, split=False).asm["ptx"]
open('/tmp/a.ptx','w').write(a); open('/tmp/b.ptx','w').write(b)
