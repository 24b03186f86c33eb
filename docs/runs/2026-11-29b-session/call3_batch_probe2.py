"""cuMemcpyBatchAsync with every copy into its own device allocation (as the loader's parameters are), one batch per
fresh process; and one batch whose copies span several of the loader's own page-locked ring slots."""
import subprocess, sys

CHILD = r'''
import sys, torch
from quickmoe.checkpoint.batched_memcpy import batch_memcpy
n, size = int(sys.argv[1]), int(sys.argv[2])
fn = batch_memcpy(); assert fn is not None
host = torch.randint(0, 255, (n * size,), dtype=torch.uint8).pin_memory()
devs = [torch.zeros(size, dtype=torch.uint8, device="cuda") for _ in range(n)]
stream = torch.cuda.Stream()
fn([(d.data_ptr(), i * size, size) for i, d in enumerate(devs)], host.data_ptr(), stream.cuda_stream)
stream.synchronize()
ok = all(torch.equal(d.cpu(), host[i * size:(i + 1) * size]) for i, d in enumerate(devs))
print("OK" if ok else "WRONG BYTES")
'''
for n, size in [(64, 16), (512, 16), (2048, 16), (4096, 16), (4096, 1 << 12), (16384, 16)]:
    r = subprocess.run([sys.executable, "-c", CHILD, str(n), str(size)], capture_output=True, text=True, timeout=120)
    tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or [""]
    print(f"batch of {n:6d} copies of {size:5d} B into {n} allocations: exit {r.returncode} {tail[0][:150]}", flush=True)
