"""A tokenizer.json recognised as o200k_harmony loads as the built-in tokenizer (tokenizer/recognise.py).

The reference is the same file loaded through `tokenizers` (HFTokenizer): the recognised tokenizer must encode,
decode, render chats and read eos tokens exactly as it does. Any change to what the file says, even one swapped
merge rule, must leave it unrecognised.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import pytest

from quickmoe.paths import cache_dir
from quickmoe.tokenizer import HFTokenizer, O200kHarmonyTokenizer, VOCAB_SIZE, load_tokenizer, write_tokenizer_files
from quickmoe.tokenizer.recognise import (RECOGNITION_VERSION, cached_verdict, decide_now, file_digest,
                                          is_o200k_harmony_document, recognise, request_recognition)
from tests.unit.test_tokenizer import SAMPLES, random_texts


@pytest.fixture(scope="module", autouse=True)
def module_cache(tmp_path_factory: pytest.TempPathFactory):
    """One fresh quickmoe cache for the module (o200k_harmony's own document is derived once into it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QUICKMOE_CACHE_DIR", str(tmp_path_factory.mktemp("quickmoe-cache")))
        mp.delenv("QUICKMOE_TOKENIZER_RECOGNITION", raising=False)
        yield


@pytest.fixture(autouse=True)
def no_verdicts():
    """Each test starts with no verdict remembered."""
    shutil.rmtree(cache_dir() / "tokenizers" / f"recognised-v{RECOGNITION_VERSION}", ignore_errors=True)


@pytest.fixture(scope="module")
def exported_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exported")
    write_tokenizer_files(out)
    return out


def _copy_with(exported_dir: Path, out: Path, document: dict | None = None, **json_options) -> Path:
    """A model directory with exported_dir's files, tokenizer.json replaced by `document` when given."""
    shutil.copytree(exported_dir, out)
    if document is not None:
        (out / "tokenizer.json").write_text(json.dumps(document, ensure_ascii=False, **json_options))
    return out


def _document(exported_dir: Path) -> dict:
    return json.loads((exported_dir / "tokenizer.json").read_text())


def _digest(directory: Path) -> str:
    return file_digest((directory / "tokenizer.json").read_bytes())


def test_recognised_file_tokenizes_as_tokenizers_does(exported_dir, tmp_path):
    directory = _copy_with(exported_dir, tmp_path / "model")
    # the directory's own eos choices must survive recognition: an id list, a special token and a plain token
    (directory / "generation_config.json").write_text(json.dumps({"eos_token_id": [200007, 200002]}))
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps({**config, "eos_token": "<|endoftext|>"}))
    (directory / "special_tokens_map.json").write_text(json.dumps({"eos_token": "\u0120world"}))  # " world"
    assert cached_verdict(_digest(directory)) is None
    assert recognise(directory / "tokenizer.json") is True
    assert cached_verdict(_digest(directory)) is True

    fast, hf = load_tokenizer(directory), HFTokenizer(directory)
    assert isinstance(fast, O200kHarmonyTokenizer) and fast.name == str(directory / "tokenizer.json")
    assert fast.eos_token_ids == hf.eos_token_ids == (200007, 200002, 199999, 2375, 200012)
    assert (fast.vocab_size, fast.uses_harmony, fast.chat_stop_token_ids) == (hf.vocab_size, True,
                                                                             hf.chat_stop_token_ids)
    assert fast.special_token_ids == hf.special_token_ids
    texts = SAMPLES + random_texts(400, seed=int(time.time())) + ["lone surrogate \udc80 here"]
    for text in texts:
        assert fast.encode(text) == hf.encode(text), repr(text)
    ids = random.Random().sample(range(VOCAB_SIZE), 2000)
    assert fast.decode_bytes(ids) == hf.decode_bytes(ids)
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": random_texts(1, seed=3)[0]}]
    assert fast.render_chat(chat, reasoning_effort="high") == hf.render_chat(chat, reasoning_effort="high")


def test_the_same_document_written_otherwise_is_recognised(exported_dir, tmp_path):
    """Merge rules as ["a", "b"] pairs, another version string, indentation: the same tokenizer."""
    document = _document(exported_dir)
    document["version"] = "1.1"
    document["model"]["merges"] = [rule.split(" ") for rule in document["model"]["merges"]]
    directory = _copy_with(exported_dir, tmp_path / "model", document, indent=1)
    assert recognise(directory / "tokenizer.json") is True
    assert isinstance(load_tokenizer(directory), O200kHarmonyTokenizer)


def _swap_merges(document: dict) -> None:
    merges = document["model"]["merges"]
    merges[10], merges[20000] = merges[20000], merges[10]


def _swap_ranks(document: dict) -> None:
    vocab = document["model"]["vocab"]
    first, second = "\u0120the", "\u0120and"
    vocab[first], vocab[second] = vocab[second], vocab[first]


def _plain_special(document: dict) -> None:
    document["added_tokens"][5]["special"] = False


def _truncate(document: dict) -> None:
    document["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}


def _other_split(document: dict) -> None:
    document["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] += "|x"


def _drop_merge(document: dict) -> None:
    del document["model"]["merges"][-1]


@pytest.mark.parametrize("change", [_swap_merges, _swap_ranks, _plain_special, _truncate, _other_split, _drop_merge])
def test_a_changed_file_is_not_recognised(exported_dir, tmp_path, change):
    document = _document(exported_dir)
    change(document)
    if change is not _swap_merges:  # the document itself (writing and reading 10 MB back would add ~1 s a case)
        assert not is_o200k_harmony_document(document)
        return
    directory = _copy_with(exported_dir, tmp_path / "model", document)  # one case through the file and the cache
    assert recognise(directory / "tokenizer.json") is False
    assert cached_verdict(_digest(directory)) is False
    assert isinstance(load_tokenizer(directory), HFTokenizer)


def test_other_tokenizers_and_broken_files_are_not_recognised(tmp_path):
    from quickmoe.checkpoint.default_model import embedded_model_dir

    assert recognise(embedded_model_dir() / "tokenizer.json") is False
    (tmp_path / "tokenizer.json").write_text('{"model": {"vocab": ')
    assert recognise(tmp_path / "tokenizer.json") is False


def test_a_first_start_decides_in_the_background(exported_dir, tmp_path):
    directory = _copy_with(exported_dir, tmp_path / "model")
    digest = _digest(directory)
    first = load_tokenizer(directory)  # no verdict: through `tokenizers`, and a background process decides
    assert isinstance(first, HFTokenizer)
    pending = cache_dir() / "tokenizers" / f"recognised-v{RECOGNITION_VERSION}" / f"{digest}.pending"
    assert not request_recognition(directory / "tokenizer.json", digest) or not pending.exists()  # not twice
    deadline = time.monotonic() + 120
    while cached_verdict(digest) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert cached_verdict(digest) is True
    while pending.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pending.exists()
    assert isinstance(load_tokenizer(directory), O200kHarmonyTokenizer)


def test_recognition_can_be_turned_off(exported_dir, tmp_path, monkeypatch):
    directory = _copy_with(exported_dir, tmp_path / "model")
    assert recognise(directory / "tokenizer.json") is True
    monkeypatch.setenv("QUICKMOE_TOKENIZER_RECOGNITION", "0")
    assert isinstance(load_tokenizer(directory), HFTokenizer)


def test_decoding_and_eos_need_no_bpe(exported_dir, tmp_path, monkeypatch):
    """A serving engine process decodes and reads eos ids but never encodes (its frontend does): harmony's BPE
    (~0.2 s holding the GIL) must not load until the first encode."""
    import quickmoe.tokenizer.o200k as o200k

    directory = _copy_with(exported_dir, tmp_path / "model")
    assert recognise(directory / "tokenizer.json") is True
    loads = []
    real = o200k.harmony_encoding
    monkeypatch.setattr(o200k, "harmony_encoding", lambda: loads.append(1) or real())
    tokenizer = load_tokenizer(directory)
    ids = random.Random().sample(range(VOCAB_SIZE), 100)
    assert tokenizer.decode_bytes(ids) == HFTokenizer(directory).decode_bytes(ids)
    assert tokenizer.eos_token_ids and tokenizer.special_token_ids and not loads
    assert tokenizer.encode("Hello world") == [13225, 2375] and loads


def test_decide_now_decides_only_what_is_undecided(exported_dir, tmp_path, monkeypatch):
    """What `bench coldstart` runs before its timed starts: it decides a file left undecided, and only that."""
    import quickmoe.tokenizer.recognise as recognise_module

    directory = _copy_with(exported_dir, tmp_path / "model")
    monkeypatch.setenv("QUICKMOE_TOKENIZER_RECOGNITION", "0")
    decide_now(directory / "tokenizer.json")
    assert cached_verdict(_digest(directory)) is None  # off: nothing decided
    monkeypatch.delenv("QUICKMOE_TOKENIZER_RECOGNITION")
    decide_now(directory / "tokenizer.json")
    assert cached_verdict(_digest(directory)) is True
    monkeypatch.setattr(recognise_module, "recognise", lambda path: pytest.fail("decided twice"))
    decide_now(directory / "tokenizer.json")  # known: not decided again
    decide_now(tmp_path / "absent" / "tokenizer.json")
