"""The streaming loader's default settings, in a module without torch (the early start sizes the
page-locked host ring from them before torch is imported).

Tuned on the H100 machine (`scripts/loader_sweep.py` and `scripts/h2d_pipeline_probe.py`, warm page cache,
gpt-oss-20b): 8 reader threads reach about 25 GB/s read + host->device, 16 threads 37-38 GB/s; 16 MiB
chunks lose 5 GB/s to 32 MiB ones, 64 MiB chunks gain nothing. The ring bounds page-locked host memory to
16 x 32 MiB = 512 MiB whatever the model size.
"""

import os

DEFAULT_CHUNK_BYTES = 32 * 1024 * 1024
DEFAULT_NUM_THREADS = min(16, os.cpu_count() or 4)
DEFAULT_NUM_BUFFERS = 16
