import os

import pytest
import torch

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


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
