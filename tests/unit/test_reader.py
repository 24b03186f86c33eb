"""CheckpointReader: bit-exact reads of single-file and sharded safetensors checkpoints, file-order
iteration, and every CheckpointError naming the culprit file and tensor."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import struct
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import quickmoe.checkpoint.reader as reader_mod
from quickmoe.checkpoint.reader import INDEX_NAME, SINGLE_NAME, CheckpointReader, TensorEntry, TensorSpec
from quickmoe.errors import CheckpointError
from quickmoe.paths import open_regular

SHAPES_DTYPES: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
    "model.embed_tokens.weight": ((16, 8), torch.bfloat16),
    "model.layers.0.self_attn.q_proj.weight": ((8, 8), torch.bfloat16),
    "model.layers.0.self_attn.q_proj.bias": ((8,), torch.float16),
    "model.layers.0.self_attn.sinks": ((4,), torch.float32),
    "model.layers.0.mlp.experts.gate_up_proj_blocks": ((2, 6, 1, 16), torch.uint8),
    "model.layers.0.mlp.experts.gate_up_proj_scales": ((2, 6, 1), torch.uint8),
    "model.layers.0.mlp.router.weight": ((2, 8), torch.float64),
    "model.layers.1.input_layernorm.weight": ((8,), torch.int8),
    "model.layers.1.a.weight": ((3, 5), torch.int16),
    "model.layers.1.b.weight": ((7,), torch.int32),
    "model.layers.1.c.weight": ((2, 2), torch.int64),
    "model.layers.1.mask": ((11,), torch.bool),
    "model.layers.1.fp8_e4m3": ((4, 4), torch.float8_e4m3fn),
    "model.layers.1.fp8_e5m2": ((9,), torch.float8_e5m2),
    "model.scalar": ((), torch.float32),
    "model.norm.weight": ((8,), torch.bfloat16),
    "lm_head.weight": ((16, 8), torch.bfloat16),
}


def make_tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    """Random tensors built from non-zero random bytes (so every bit pattern matters)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, (shape, dtype) in SHAPES_DTYPES.items():
        n = max(1, int(torch.Size(shape).numel()))
        if dtype == torch.bool:
            t = torch.randint(0, 2, (n,), generator=g, dtype=torch.uint8)
            t[0] = 1
            out[name] = t.bool().reshape(shape)
        else:
            raw = torch.randint(1, 256, (n * dtype.itemsize,), generator=g, dtype=torch.uint8)
            out[name] = raw.view(dtype).reshape(shape)
    return out


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


def assert_same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(bits(a), bits(b))


SHARDS = [  # tensor names per shard, for the sharded checkpoint
    ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.bias",
     "model.layers.0.self_attn.sinks"],
    ["model.layers.0.mlp.experts.gate_up_proj_blocks", "model.layers.0.mlp.experts.gate_up_proj_scales",
     "model.layers.0.mlp.router.weight", "model.layers.1.input_layernorm.weight", "model.layers.1.a.weight",
     "model.layers.1.b.weight"],
    ["model.layers.1.c.weight", "model.layers.1.mask", "model.layers.1.fp8_e4m3", "model.layers.1.fp8_e5m2",
     "model.scalar", "model.norm.weight", "lm_head.weight"],
]


def shard_name(i: int) -> str:
    return f"model-{i + 1:05d}-of-{len(SHARDS):05d}.safetensors"


@pytest.fixture(scope="module")
def tensors() -> dict[str, torch.Tensor]:
    return make_tensors()


@pytest.fixture(scope="module")
def single_src(tmp_path_factory, tensors) -> Path:
    d = tmp_path_factory.mktemp("single")
    save_file(tensors, d / SINGLE_NAME, metadata={"format": "pt"})
    return d


@pytest.fixture(scope="module")
def sharded_src(tmp_path_factory, tensors) -> Path:
    d = tmp_path_factory.mktemp("sharded")
    weight_map = {}
    for i, names in enumerate(SHARDS):
        save_file({n: tensors[n] for n in names}, d / shard_name(i), metadata={"format": "pt"})
        weight_map.update({n: shard_name(i) for n in names})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    (d / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    return d


@pytest.fixture
def single(single_src, tmp_path) -> Path:
    """A private copy of the single-file checkpoint, free to corrupt."""
    return Path(shutil.copytree(single_src, tmp_path / "single"))


@pytest.fixture
def sharded(sharded_src, tmp_path) -> Path:
    """A private copy of the sharded checkpoint, free to corrupt."""
    return Path(shutil.copytree(sharded_src, tmp_path / "sharded"))


def raises(*needles: str) -> AbstractContextManager:
    """pytest.raises(CheckpointError) whose message must contain every needle, in any order."""
    return pytest.raises(CheckpointError, match="(?s)" + "".join(f"(?=.*{re.escape(n)})" for n in needles))


def write_raw(path: Path, header: dict | bytes, data: bytes = b"") -> None:
    """A safetensors file written by hand, for headers the library would refuse to write."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def edit_index(d: Path, edit) -> None:
    path = d / INDEX_NAME
    index = json.loads(path.read_text())
    edit(index)
    path.write_text(json.dumps(index))


# -- reading ---------------------------------------------------------------------------------------------

def test_single_file_reads_back_bit_exact(single_src, tensors):
    r = CheckpointReader(single_src)
    assert r.files == [single_src / SINGLE_NAME] and r.index_path is None
    assert set(r.entries) == set(tensors) and len(r) == len(tensors)
    assert r.total_bytes == sum(t.numel() * t.element_size() for t in tensors.values())
    assert dict(r.shards[r.files[0]].metadata) == {"format": "pt"}
    raw = (single_src / SINGLE_NAME).read_bytes()
    for name, t in tensors.items():
        e = r.entries[name]
        assert isinstance(e, TensorEntry) and e.file == single_src / SINGLE_NAME
        assert (e.dtype, e.shape, e.nbytes) == (t.dtype, tuple(t.shape), t.numel() * t.element_size())
        assert raw[e.offset:e.end] == bytes(bits(t).tolist())  # the location is explicit and right
        got = r.read(name)
        assert_same(got, t)
        assert got.untyped_storage().nbytes() == e.nbytes  # owns exactly its own bytes


def test_sharded_reads_back_bit_exact(sharded_src, tensors):
    r = CheckpointReader(sharded_src)
    assert r.files == [sharded_src / shard_name(i) for i in range(len(SHARDS))]
    assert r.index_path == sharded_src / INDEX_NAME
    for i, names in enumerate(SHARDS):
        assert {e.name for e in r.entries_by_file[r.files[i]]} == set(names)
        for n in names:
            assert r.entries[n].file == sharded_src / shard_name(i)
    for name, t in tensors.items():
        assert_same(r.read(name), t)
    assert r.read("model.layers.1.fp8_e4m3").dtype == torch.float8_e4m3fn
    assert r.read("model.scalar").shape == ()


def test_iter_tensors_file_order_complete_one_open_per_shard(sharded_src, tensors, monkeypatch):
    r = CheckpointReader(sharded_src)
    opened: list[Path] = []

    def counting_open(path):
        opened.append(Path(path))
        return open_regular(path)

    monkeypatch.setattr(reader_mod, "open_regular", counting_open)
    got = list(r.iter_tensors())
    assert opened == r.files
    assert [n for n, _ in got] == [e.name for f in r.files for e in r.entries_by_file[f]]
    assert sorted(n for n, _ in got) == sorted(tensors)
    locations = [(r.files.index(r.entries[n].file), r.entries[n].offset) for n, _ in got]
    assert locations == sorted(locations)  # shard by shard, increasing offsets: sequential IO
    for name, t in got:
        assert_same(t, tensors[name])


def test_iter_tensors_subset_skips_untouched_shards(sharded_src, tensors, monkeypatch):
    r = CheckpointReader(sharded_src)
    opened: list[Path] = []
    monkeypatch.setattr(reader_mod, "open_regular", lambda p: opened.append(Path(p)) or open_regular(p))
    wanted = ["lm_head.weight", "model.layers.1.mask", "model.embed_tokens.weight"]
    got = dict(r.iter_tensors(wanted))
    assert set(got) == set(wanted) and opened == [r.files[0], r.files[2]]
    for name in wanted:
        assert_same(got[name], tensors[name])


def test_reads_are_logged_at_debug(single_src, caplog):
    r = CheckpointReader(single_src)
    with caplog.at_level(logging.DEBUG, logger="quickmoe.checkpoint"):
        list(r.iter_tensors(["lm_head.weight"]))
    assert "lm_head.weight" in caplog.text and SINGLE_NAME in caplog.text


def test_unknown_tensor_is_named(single_src):
    r = CheckpointReader(single_src)
    with raises("lm_head.weigth", str(single_src), "did you mean lm_head.weight"):
        r.read("lm_head.weigth")
    with raises("no.such.tensor"):
        next(r.iter_tensors(["lm_head.weight", "no.such.tensor"]))


def test_stray_safetensors_file_is_ignored_with_warning(sharded, caplog):
    save_file({"x": torch.ones(2)}, sharded / "consolidated.safetensors")
    with caplog.at_level(logging.WARNING):
        r = CheckpointReader(sharded)
    assert "x" not in r.entries and "consolidated.safetensors" in caplog.text


# -- directory and index ---------------------------------------------------------------------------------

def test_missing_directory(tmp_path):
    with raises(str(tmp_path / "nope"), "does not exist"):
        CheckpointReader(tmp_path / "nope")


def test_path_is_a_file(single_src):
    with raises(str(single_src / SINGLE_NAME), "not a directory"):
        CheckpointReader(single_src / SINGLE_NAME)


def test_no_safetensors_file(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with raises(str(tmp_path), SINGLE_NAME, INDEX_NAME, "no *.safetensors"):
        CheckpointReader(tmp_path)


def test_shards_without_index(sharded):
    (sharded / INDEX_NAME).unlink()
    with raises(str(sharded), shard_name(0), "no index"):
        CheckpointReader(sharded)


@pytest.mark.parametrize("text, needle", [
    ("{not json", "not valid UTF-8 JSON"),
    (b"\xff\xfe{}", "not valid UTF-8 JSON"),
    ("[1, 2]", "expected a JSON object, found list"),
    ('{"metadata": {}}', 'no "weight_map"'),
    ('{"weight_map": []}', "found list"),
    ('{"weight_map": {}}', "found an empty object"),
])
def test_corrupt_index(sharded, text, needle):
    path = sharded / INDEX_NAME
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with raises(str(path), "corrupt index", needle):
        CheckpointReader(sharded)


def test_index_value_not_a_file_name(sharded):
    edit_index(sharded, lambda ix: ix["weight_map"].update({"lm_head.weight": "../elsewhere.safetensors"}))
    with raises(INDEX_NAME, "lm_head.weight", "../elsewhere.safetensors"):
        CheckpointReader(sharded)


def test_index_names_missing_shard_file(sharded):
    (sharded / shard_name(1)).unlink()
    with raises(INDEX_NAME, shard_name(1), "does not exist", SHARDS[1][0]):
        CheckpointReader(sharded)


def test_missing_index_target(sharded):
    edit_index(sharded, lambda ix: ix["weight_map"].update({"model.ghost.weight": shard_name(2)}))
    with raises(INDEX_NAME, "missing index target", "model.ghost.weight", shard_name(2)):
        CheckpointReader(sharded)


def test_index_names_wrong_shard(sharded):
    edit_index(sharded, lambda ix: ix["weight_map"].update({"lm_head.weight": shard_name(0)}))
    with raises("missing index target", "lm_head.weight", f"indexed in {shard_name(0)}", f"found in {shard_name(2)}"):
        CheckpointReader(sharded)


def test_missing_index_entry(sharded):
    edit_index(sharded, lambda ix: ix["weight_map"].pop("model.layers.1.mask"))
    with raises(INDEX_NAME, "missing index entry", "model.layers.1.mask", shard_name(2)):
        CheckpointReader(sharded)


def test_same_tensor_in_two_shards(sharded, tensors):
    names = SHARDS[1] + ["lm_head.weight"]
    save_file({n: tensors[n] for n in names}, sharded / shard_name(1))
    with raises("lm_head.weight", "two shards", shard_name(1), shard_name(2)):
        CheckpointReader(sharded)


# -- shard headers ---------------------------------------------------------------------------------------

def test_file_shorter_than_8_bytes(single):
    os.truncate(single / SINGLE_NAME, 5)
    with raises(str(single / SINGLE_NAME), "5 bytes", "at least 8"):
        CheckpointReader(single)


def test_header_length_larger_than_file(single):
    path = single / SINGLE_NAME
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.write(struct.pack("<Q", size))
    with raises(str(path), f"header length {size}", "larger than the file", f"file is {size} bytes"):
        CheckpointReader(single)


def test_header_length_absurd(single):
    path = single / SINGLE_NAME
    with open(path, "r+b") as f:
        f.write(struct.pack("<Q", 2**40))
    with raises(str(path), f"header length {2**40}", "absurd"):
        CheckpointReader(single)


@pytest.mark.parametrize("offset, byte, needle", [(8, b"\xff", "not UTF-8"), (8, b"x", "not valid JSON")])
def test_header_not_utf8_json(single, offset, byte, needle):
    path = single / SINGLE_NAME
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(byte)
    with raises(str(path), "corrupt safetensors header", needle):
        CheckpointReader(single)


GOOD = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize("header, needles", [
    (b"[1, 2]", ["expected a JSON object, found list"]),
    (b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "w": {}}', ["'w' appears twice"]),
    # keys seen twice where each entry is well formed (the header's fast parse must still find them)
    (b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, '
     b'"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}', ["'w' appears twice"]),
    (b'{"w": {"dtype": "F32", "dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}', ["'dtype' appears twice"]),
    (b'{"__metadata__": {"a": "1"}, "__metadata__": {"a": "2"}, '
     b'"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}', ["'__metadata__' appears twice"]),
    ({"__metadata__": {"format": 1}, "w": GOOD}, ["__metadata__"]),
    ({"w": "F32"}, ["tensor w", "must be an object"]),
    ({"w": {"dtype": "F32", "shape": [2]}}, ["tensor w", "lacks data_offsets"]),
    ({"w": {"shape": [2], "data_offsets": [0, 8]}}, ["tensor w", "lacks dtype"]),
    ({"w": {"dtype": "F32", "data_offsets": [0, 8]}}, ["tensor w", "lacks shape"]),
    ({"w": {**GOOD, "dtype": "F7"}}, ["tensor w", "unknown dtype 'F7'", "BF16"]),
    ({"w": {**GOOD, "dtype": ["F32"]}}, ["tensor w", "unknown dtype"]),
    ({"w": {**GOOD, "shape": [2, -1]}}, ["tensor w", "shape [2, -1]"]),
    ({"w": {**GOOD, "shape": "2"}}, ["tensor w", "shape '2'"]),
    ({"w": {**GOOD, "data_offsets": [0]}}, ["tensor w", "data_offsets [0]"]),
    ({"w": {**GOOD, "data_offsets": [0, 6]}}, ["tensor w", "span 6 bytes", "F32 [2] needs 8"]),
    ({"w": {**GOOD, "data_offsets": [8, 0]}}, ["tensor w", "span -8 bytes"]),
    ({"w": {**GOOD, "shape": [3]}}, ["tensor w", "span 8 bytes", "F32 [3] needs 12"]),
    ({"a": {**GOOD, "shape": [4], "data_offsets": [0, 16]}, "b": {**GOOD, "data_offsets": [8, 16]}},
     ["tensors a", "and b", "overlap"]),
    ({"a": {**GOOD, "shape": [4], "data_offsets": [0, 16]}, "z": {**GOOD, "shape": [0], "data_offsets": [4, 4]},
      "b": {**GOOD, "data_offsets": [12, 20]}}, ["tensors a", "and b", "overlap"]),
])
def test_corrupt_header_entry(tmp_path, header, needles):
    path = tmp_path / SINGLE_NAME
    write_raw(path, header, bytes(range(1, 33)))
    with raises(str(path), *needles):
        CheckpointReader(tmp_path)


def test_a_header_that_names_its_keys_elsewhere_still_reads(tmp_path):
    """Metadata and a tensor name holding the strings "dtype" / "shape" / "data_offsets" send the header to the
    strict parse, which finds no key twice and gives the same entries."""
    header = {"__metadata__": {"note": "dtype", "shape": "data_offsets"},
              "shape": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "U8", "shape": [3], "data_offsets": [8, 11]}}
    write_raw(tmp_path / SINGLE_NAME, header, bytes(range(1, 17)))
    r = CheckpointReader(tmp_path)
    assert sorted(r.entries) == ["b", "shape"]
    assert r.entries["b"].shape == (3,) and r.entries["shape"].dtype == torch.int32


def test_hand_written_file_with_gaps_and_empty_tensor_reads(tmp_path):
    data = bytes(range(1, 41))
    header = {"__metadata__": {"k": "v"}, "b": {"dtype": "U8", "shape": [2, 2], "data_offsets": [20, 24]},
              "e": {"dtype": "BF16", "shape": [0, 3], "data_offsets": [8, 8]},
              "a": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}}
    write_raw(tmp_path / SINGLE_NAME, header, data)
    r = CheckpointReader(tmp_path)
    assert [n for n, _ in r.iter_tensors()] == ["a", "e", "b"]
    assert r.read("b").tolist() == [[21, 22], [23, 24]]
    assert torch.equal(r.read("a"), torch.frombuffer(bytearray(data[:8]), dtype=torch.int32))
    assert r.read("e").shape == (0, 3) and r.read("e").dtype == torch.bfloat16


def test_truncated_single_file_detected_at_construction(single, monkeypatch):
    path = single / SINGLE_NAME
    size = path.stat().st_size
    cut = sorted((e for e in CheckpointReader(single).entries.values() if e.end > size - 10), key=lambda e: e.offset)
    os.truncate(path, size - 10)
    monkeypatch.setattr(reader_mod, "_read_entry", lambda *a: pytest.fail("data read before the check"))
    with raises(str(path), "truncated", f"tensor {cut[0].name}", f"expected file size {size} bytes, found {size - 10}",
                f"{len(cut)} tensor(s) cut off"):
        CheckpointReader(single)


def test_truncated_shard_detected_at_construction(sharded):
    path = sharded / shard_name(1)
    r = CheckpointReader(sharded)
    first_cut = r.entries_by_file[path][-2]
    os.truncate(path, first_cut.end - 1)
    with raises(str(path), "truncated", f"tensor {first_cut.name}", f"found {first_cut.end - 1}",
                "2 tensor(s) cut off"):
        CheckpointReader(sharded)


def test_short_read_after_opening(sharded):
    r = CheckpointReader(sharded)
    path = sharded / shard_name(2)
    victim = r.entries_by_file[path][-1]
    os.truncate(path, victim.end - 3)
    with raises(str(path), "short read", victim.name, f"expected {victim.nbytes} bytes"):
        r.read(victim.name)
    with raises(str(path), "short read", victim.name):
        list(r.iter_tensors())


def test_partial_readinto_is_completed(single_src, tensors):
    """readinto may return fewer bytes than asked (a single read() is capped near 2 GiB on Linux)."""

    class Dribble:
        def __init__(self, raw):
            self.raw = raw

        def seek(self, pos):
            return self.raw.seek(pos)

        def readinto(self, view):
            return self.raw.readinto(view[:3])

    r = CheckpointReader(single_src)
    with open(single_src / SINGLE_NAME, "rb", buffering=0) as raw:
        for name in ("model.embed_tokens.weight", "model.layers.1.fp8_e5m2", "model.scalar"):
            assert_same(reader_mod._read_entry(Dribble(raw), r.entries[name]), tensors[name])


# -- validate --------------------------------------------------------------------------------------------

def specs_of(tensors: dict[str, torch.Tensor]) -> dict[str, TensorSpec]:
    return {n: TensorSpec(n, tuple(t.shape), t.dtype) for n, t in tensors.items()}


def test_validate_accepts_matching_specs(sharded_src, tensors):
    r = CheckpointReader(sharded_src)
    r.validate(specs_of(tensors))
    r.validate(list(specs_of(tensors).values()))


def test_validate_reports_all_problems_at_once(sharded_src, tensors):
    r = CheckpointReader(sharded_src)
    specs = specs_of(tensors)
    specs.pop("model.layers.1.mask")  # -> unexpected, in shard 3
    specs["model.layers.9.missing"] = TensorSpec("model.layers.9.missing", (3, 4), torch.bfloat16)
    specs["model.layers.0.self_attn.sinks"] = TensorSpec("model.layers.0.self_attn.sinks", (5,), torch.float32)
    specs["model.norm.weight"] = TensorSpec("model.norm.weight", (8,), torch.float32)
    specs["lm_head.weight"] = TensorSpec("lm_head.weight", (8, 16), torch.float16)
    with pytest.raises(CheckpointError) as err:
        r.validate(specs.values())
    lines = str(err.value).splitlines()
    assert str(sharded_src) in lines[0] and "5 problem(s)" in lines[0]

    def line(name: str) -> str:
        (found,) = [x for x in lines if f" {name}" in x]
        return found

    assert "missing" in line("model.layers.9.missing") and "expected BF16 [3, 4]" in line("model.layers.9.missing")
    assert "unexpected" in line("model.layers.1.mask") and shard_name(2) in line("model.layers.1.mask")
    assert "BOOL [11]" in line("model.layers.1.mask")
    sinks = line("model.layers.0.self_attn.sinks")
    assert "wrong shape" in sinks and shard_name(0) in sinks and "expected F32 [5], found F32 [4]" in sinks
    norm = line("model.norm.weight")
    assert "wrong dtype" in norm and shard_name(2) in norm and "expected F32 [8], found BF16 [8]" in norm
    head = line("lm_head.weight")
    assert "wrong shape and dtype" in head and "expected F16 [8, 16], found BF16 [16, 8]" in head


def test_validate_caps_the_listing(single_src, tensors):
    r = CheckpointReader(single_src)
    specs = list(specs_of(tensors).values()) + [TensorSpec(f"extra.{i}", (1,), torch.float32) for i in range(30)]
    with pytest.raises(CheckpointError) as err:
        r.validate(specs)
    lines = str(err.value).splitlines()
    assert "30 problem(s)" in lines[0] and len(lines) == 22 and lines[-1].strip() == "... and 10 more"
    assert all(SINGLE_NAME in x or "found in no file" in x for x in lines[1:-1])
