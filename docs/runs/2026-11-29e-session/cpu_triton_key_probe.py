import time
t0 = time.perf_counter()
import triton  # noqa: F401
from triton.runtime import cache as triton_cache
t1 = time.perf_counter()
from quickmoe.executor.triton_key import use_cached_triton_key
outcome = use_cached_triton_key()
t2 = time.perf_counter()
key = triton_cache.get_cache_key.__globals__["triton_key"]()
t3 = time.perf_counter()
print(f"{outcome} import_triton={t1-t0:.3f} install={t2-t1:.4f} key={t3-t2:.4f} total_after_import={t3-t1:.4f}")
