"""Imports point one way: every `quickmoe` import in src/quickmoe goes to the same layer or one below it.

The layer order lives here (top first). A module belongs to the layer of its first-level package (or to its
own name for a top-level module). Imports inside functions count as much as those at the top of a file: a
lazy import is still a dependency. The package root `quickmoe/__init__.py` is the public facade: its lazy
`LLM` / `SamplingParams` attributes may reach up; everything may read its constants (`__version__`, the
import clock).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "quickmoe"

# Top first. A module may import from its own layer or any layer below it, never above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__", "cli", "bench", "llm"),  # entry points: the command line, benchmarks, the Python API
    ("server",),  # HTTP API -> engine
    ("engine",),  # requests: Engine, Scheduler, Sequence, SamplingParams, detokenizer, KV blocks -> executor
    ("executor",),  # tensors: ModelRunner, KV cache tensors, CUDA graphs, compile -> models, checkpoint
    ("models",),  # one file per architecture, the registry -> layers
    ("layers",),  # nn.Modules -> forward, kernels, layouts, distributed
    ("distributed",),  # ParallelContext, shards, process-group start (torch.distributed)
    ("forward",),  # the contract layers compute against: ForwardBatch, sampling metadata, custom ops
    ("kernels",),  # Triton kernels beside their torch references
    ("layouts",),  # checkpoint layout -> kernel layout; PermutationCache
    ("startup",),  # early start (before torch), CUDA pre-init, StartupReport
    ("checkpoint",),  # reader, streaming loader, weight loaders, synthesis
    ("tokenizer",),
    ("formats",),  # number formats as pure functions
    # the base every layer may use
    ("config", "engine_config", "quant_config", "rope_config", "config_fields", "errors", "paths", "sources"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}

# The package root: the public facade (lazy attributes may point anywhere), readable by everyone.
FACADE = "quickmoe"


def layer_of(module: str) -> str:
    """'quickmoe.engine.scheduler' -> 'engine'; 'quickmoe.config' -> 'config'; 'quickmoe' -> 'quickmoe'."""
    parts = module.split(".")
    assert parts[0] == "quickmoe", module
    return parts[1] if len(parts) > 1 else FACADE


def module_name(path: Path, src: Path = SRC) -> str:
    rel = path.relative_to(src.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def quickmoe_imports(path: Path, src: Path = SRC) -> list[tuple[int, str]]:
    """(line, imported module) for every import of a quickmoe module in the file, relative ones resolved.
    `from quickmoe.x import y` counts as an import of quickmoe.x.y when y is a submodule, else of quickmoe.x
    (the layer is the same either way except for `from quickmoe import x`, resolved to quickmoe.x)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path, src)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "quickmoe"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "quickmoe":
                continue
            if base == "quickmoe":  # `from quickmoe import x`: x is a subpackage/module or a root attribute
                for alias in node.names:
                    sub = src / alias.name
                    is_module = sub.is_dir() or sub.with_suffix(".py").exists()
                    found.append((node.lineno, f"quickmoe.{alias.name}" if is_module else "quickmoe"))
            else:
                found.append((node.lineno, base))
    return found


def upward_imports(src: Path = SRC) -> list[str]:
    """'file:line imports X (layer a) from layer b' for every import that points up."""
    problems = []
    for path in sorted(src.rglob("*.py")):
        importer = module_name(path, src)
        importer_layer = layer_of(importer)
        for line, imported in quickmoe_imports(path, src):
            target = layer_of(imported)
            where = f"{path.relative_to(src.parent)}:{line}"
            if importer_layer == FACADE or target == FACADE:
                continue
            if importer_layer not in RANK:
                problems.append(f"{where}: module {importer} is in no layer of the allow-list (add its package "
                                "to LAYERS in tests/unit/test_import_layers.py)")
                continue
            if target not in RANK:
                problems.append(f"{where}: imports {imported}, which is in no layer of the allow-list")
                continue
            if RANK[target] < RANK[importer_layer]:
                problems.append(f"{where}: {importer} ({importer_layer}) imports {imported} ({target}), a layer "
                                f"above it")
    return problems


def test_every_import_points_down():
    problems = upward_imports()
    assert not problems, "imports pointing up:\n" + "\n".join(problems)


def test_every_package_is_in_a_layer():
    names = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    missing = sorted(names - set(RANK))
    assert not missing, f"packages/modules of src/quickmoe in no layer of LAYERS: {missing}"


def test_the_check_catches_an_upward_import(tmp_path):
    """The checker itself: a kernel importing the engine, a relative import from layers up to models, and a
    lazy import inside a function are each reported with file and line; a downward import is not."""
    root = tmp_path / "quickmoe"
    for pkg in ("kernels", "layers", "engine", "models"):
        (root / pkg).mkdir(parents=True)
        (root / pkg / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "kernels" / "bad.py").write_text("from quickmoe.engine.scheduler import Scheduler\n")
    (root / "layers" / "rel.py").write_text("import torch\n\nfrom ..models import registry\n")
    (root / "layers" / "lazy.py").write_text("def f():\n    import quickmoe.engine.engine\n")
    (root / "models" / "fine.py").write_text("from quickmoe.layers.rel import x\nfrom . import other\n")
    problems = upward_imports(root)
    text = "\n".join(problems)
    assert len(problems) == 3, text
    assert "quickmoe/kernels/bad.py:1" in text and "quickmoe.engine.scheduler (engine)" in text
    assert "quickmoe/layers/rel.py:3" in text and "quickmoe.models" in text
    assert "quickmoe/layers/lazy.py:2" in text


@pytest.mark.parametrize("module,layer", [("quickmoe.engine.scheduler", "engine"), ("quickmoe.config", "config"),
                                          ("quickmoe", FACADE)])
def test_layer_of(module, layer):
    assert layer_of(module) == layer
