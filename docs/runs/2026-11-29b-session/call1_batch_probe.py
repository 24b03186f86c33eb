"""Which cuMemcpyBatchAsync batch sizes run on this driver: one batch per fresh process (a crash kills only it)."""
import subprocess, sys

CHILD = r'''
import sys, torch
from quickmoe.checkpoint.batched_memcpy import batch_memcpy
n, size, zero = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
fn = batch_memcpy(); assert fn is not None
host = torch.randint(0, 255, (n * size,), dtype=torch.uint8).pin_memory()
dev = torch.zeros(n * size, dtype=torch.uint8, device="cuda")
stream = torch.cuda.Stream()
copies = [(dev.data_ptr() + i * size, i * size, 0 if (zero and i % 7 == 3) else size) for i in range(n)]
fn(copies, host.data_ptr(), stream.cuda_stream)
stream.synchronize()
ok = all(torch.equal(dev[i*size:(i+1)*size].cpu(), host[i*size:(i+1)*size]) for i in range(n) if copies[i][2])
print("OK" if ok else "WRONG BYTES")
'''
for n, size, zero in [(64, 16, 0), (64, 16, 1), (128, 16, 0), (256, 16, 0), (512, 16, 0), (1024, 16, 0),
                      (2048, 16, 0), (4096, 16, 0), (4096, 4096, 0), (16384, 16, 0)]:
    r = subprocess.run([sys.executable, "-c", CHILD, str(n), str(size), str(zero)], capture_output=True, text=True,
                       timeout=120)
    tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or [""]
    print(f"batch of {n:6d} copies of {size:5d} B{' (some 0 B)' if zero else ''}: exit {r.returncode} {tail[0][:150]}",
          flush=True)
