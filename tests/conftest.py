import os

# `make test` runs the suite in pytest-xdist workers, one process each. Torch's intra-op pool starts a thread per core
# in every worker and in every server or rank a test spawns, so two workers on a 2-core machine oversubscribe it and
# OpenMP's spinning threads slow everything (a 400-token decode of the SIGTERM test took over a minute, past the
# server's drain timeout). Each worker, and what it spawns, computes on one thread.
_XDIST_WORKER = bool(os.environ.get("PYTEST_XDIST_WORKER"))
if _XDIST_WORKER:
    os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

if _XDIST_WORKER:
    torch.set_num_threads(1)

# Without a GPU, Triton kernels run in Triton's interpreter (numpy on the CPU). It is read when a kernel is
# decorated, so it is set here, before any test module imports one.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Tests never download anything: make any accidental network use fail fast.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# A tokenizer.json not yet recognised as o200k_harmony or not would start a background process deciding it
# (tokenizer/recognise.py), per test cache directory, outliving the test. Off by default in the tests; the tests
# of recognition (tests/unit/test_tokenizer_recognition.py) and of `bench coldstart` (test_startup.py) turn it on.
os.environ.setdefault("QUICKMOE_TOKENIZER_RECOGNITION", "0")


@pytest.fixture(autouse=True)
def _release_cached_gpu_memory():
    """Hand the test's cached CUDA blocks back to the driver when it ends.

    The GPU runs (scripts/device/hotpath.sh tests) put 15 pytest-xdist workers on one GPU; each worker's caching
    allocator would otherwise keep the peak of every test it ran (1-11 GiB each), and on an 80 GiB H100 the workers
    then ran each other out of memory (2026-12-05, 59 tests failed with CUDA OOM, none otherwise).
    """
    yield
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        import gc

        gc.collect()
        torch.cuda.empty_cache()


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
