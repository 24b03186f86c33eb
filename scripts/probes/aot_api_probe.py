"""What this torch offers for AOT compile (issue 16, `--compile aot`): torch 2.13 has `torch.compile(f).aot_compile`;
the GPU machine's 2.11 lacks it. Prints the entry points found and tries the lower one
(`torch._dynamo.aot_compile.aot_compile_fullgraph`) where the method is missing, on a small function: compile,
save, load, call, guards. On the H100's torch 2.11 (2026-11-27) the entry point refused Inductor's output."""

from __future__ import annotations

import inspect
import io
import sys
import tempfile

import torch


def main() -> int:
    print("torch", torch.__version__)
    fn = torch.compile(lambda x: x * 2 + 1, fullgraph=True, dynamic=True)
    print("compiled function has aot_compile:", hasattr(fn, "aot_compile"))
    print("torch.compiler:", [n for n in dir(torch.compiler) if "compiled" in n or "aot" in n or "save" in n])
    try:
        import torch._dynamo.aot_compile as aot
    except ImportError as exc:
        print("no torch._dynamo.aot_compile:", exc)
        return 0
    print("torch._dynamo.aot_compile:", [n for n in dir(aot) if not n.startswith("_")])
    entry = getattr(aot, "aot_compile_fullgraph", None)
    if entry is None:
        return 0
    print("aot_compile_fullgraph", inspect.signature(entry))
    print("AOTCompiledFunction:", [n for n in dir(aot.AOTCompiledFunction) if not n.startswith("__")])
    def f(x, y):
        return torch.sin(x) * y + 1

    x, y = torch.randn(7, device="cuda" if torch.cuda.is_available() else "cpu"), 3.0
    if hasattr(fn, "aot_compile"):
        compiled = torch.compile(f, fullgraph=True, dynamic=True).aot_compile(((x, y), {}))
    else:  # the entry point beneath the method, with the functorch settings 2.13's sets around the backend
        from torch._dynamo.eval_frame import innermost_backend

        context = torch._dynamo.optimize("inductor", nopython=True, dynamic=True)
        wanted = {"bundled_autograd_cache": True, "force_autograd_cache": True, "bypass_autograd_cache_key": True,
                  "strict_autograd_cache": True, "force_non_lazy_backward_lowering": True}
        patch = {k: v for k, v in wanted.items() if hasattr(torch._functorch.config, k)}
        print("functorch settings found:", sorted(patch))
        dynamic = {"dynamic": True} if "dynamic" in inspect.signature(entry).parameters else {}
        with torch._functorch.config.patch(patch):  # torch 2.11 on the H100: still "does not implement
            # SerializableCallable" (2026-11-27)
            compiled = entry(f, ((x, y), {}), hooks=context._hooks, backend=innermost_backend(context.callback),
                             **dynamic)
    print("compiled:", type(compiled).__name__)
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/f.bin"
        compiled.save_compiled_function(path)
        with open(path, "rb") as fh:
            extra = ({"f_globals": globals()}
                     if "f_globals" in inspect.signature(torch.compiler.load_compiled_function).parameters else {})
            loaded = torch.compiler.load_compiled_function(fh, **extra)
    x2 = torch.randn(11, device=x.device)
    print("loaded: close to eager", torch.allclose(loaded(x2, y), f(x2, y), atol=1e-6), "guard_check", loaded.guard_check(x2, y))
    return 0


if __name__ == "__main__":
    sys.exit(main())
