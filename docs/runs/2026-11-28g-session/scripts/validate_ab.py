"""CheckpointReader.validate before (a copy of reader.py from 0baedb4 in /tmp/oldr/old_reader.py) and after
(e2bcc83), in turns, on the 74,163 specs of an NVFP4 Qwen3-30B-A3B-layout checkpoint with tiny dimensions:

    PYTHONPATH=src python3 scripts/probes/many_tensors_probe.py write /tmp/q3nv --weights nvfp4
    mkdir -p /tmp/oldr && git show 0baedb4:src/quickmoe/checkpoint/reader.py > /tmp/oldr/old_reader.py
    PYTHONPATH=src python3 docs/runs/2026-11-28g-session/scripts/validate_ab.py
"""
import gc
import statistics
import sys
import time

import torch

sys.path.insert(0, "/tmp/oldr")
import old_reader  # noqa: E402

from quickmoe.checkpoint.bindings import checkpoint_bindings  # noqa: E402
from quickmoe.checkpoint.dtype_adoption import adopt_checkpoint_dtypes  # noqa: E402
from quickmoe.checkpoint.reader import CheckpointReader  # noqa: E402
from quickmoe.config import ModelConfig  # noqa: E402
from quickmoe.models.registry import build_model  # noqa: E402

gc.disable()
directory = "/tmp/q3nv"
reader = CheckpointReader(directory)
model = build_model(ModelConfig.from_dir(directory), dtype=torch.bfloat16, device=torch.device("cpu"))
adopt_checkpoint_dtypes(model, reader)
specs = {name: binding.spec for name, binding in checkpoint_bindings(model).items()}
times = {"new": [], "old": []}
for _ in range(7):
    start = time.perf_counter()
    reader.validate(specs)
    times["new"].append(time.perf_counter() - start)
    start = time.perf_counter()
    old_reader.CheckpointReader.validate(reader, specs)
    times["old"].append(time.perf_counter() - start)
print({k: round(statistics.median(v), 4) for k, v in times.items()}, len(specs), "specs")
