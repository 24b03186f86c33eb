# One-command set-up and runs on a fresh machine (CPU). On GPU machines install your CUDA torch first
# and run `pip install -e '.[dev]'` yourself.
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=
# Test processes (pytest-xdist; each test file runs whole in one of them, its torch on one thread: tests/conftest.py)
TEST_WORKERS ?= 2

.PHONY: setup demo serve generate test clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

# The main job on the embedded default (a small gpt-oss trained on the Python stdlib's source, shipped in the
# package, on CPU): quickmoe serve, a greedy and a streamed completion through its OpenAI API, metrics, SIGTERM.
demo: setup
	$(PY) scripts/demo.py

# Serve the embedded default in the foreground (http://127.0.0.1:8000, Ctrl-C stops it).
serve: setup
	$(VENV)/bin/quickmoe serve --device cpu

generate: setup
	$(VENV)/bin/quickmoe generate --prompt 'def fibonacci(n):' --max-tokens 48 --temperature 0 --device cpu

test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
