"""The offline gpt-oss tokenizer: o200k_harmony ids, harmony chat, the tokenizer.json export, errors.

The reference is tiktoken's own o200k_harmony definition, fed the local vocabulary file (its download
function is replaced, so nothing is fetched). Every test runs against a fresh cache directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from quickmoe.errors import RequestError, TokenizerError
from quickmoe.paths import cache_dir
from quickmoe.tokenizer import (CHAT_STOP_TOKEN_IDS, GPT_OSS_EOS_TOKEN_IDS, UNPARSED_CHANNEL, VOCAB_SIZE,
                                ChatSegment, HFTokenizer, O200kHarmonyTokenizer, load_tokenizer,
                                write_tokenizer_files)
from quickmoe.tokenizer.chat import harmony_encoding
from quickmoe.tokenizer.vocab import (O200K_BASE_NUM_RANKS, O200K_BASE_SHA256, O200K_PATTERN, o200k_base_file,
                                      load_mergeable_ranks, read_tiktoken_file, special_token_names)

# harmony's default system message (as the model card prescribes), then <|start|>user<|message|>Hello world<|end|>
# <|start|>assistant
HELLO_WORLD_CHAT_IDS = [200006, 17360, 200008, 3575, 553, 17554, 162016, 11, 261, 4410, 6439, 2359, 22203, 656, 7788, 17527, 558, 87447, 100594, 25, 220, 1323, 19, 12, 3218, 279, 30377, 289, 25, 14093, 279, 2, 13888, 18403, 25, 8450, 11, 49159, 11, 1721, 13, 21030, 2804, 413, 7360, 395, 1753, 3176, 13, 200007, 200006, 1428, 200008, 13225, 2375, 200007, 200006, 173781]
assert HELLO_WORLD_CHAT_IDS[-8:] == [200006, 1428, 200008, 13225, 2375, 200007, 200006, 173781]

SAMPLES = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog. I'm sure it's fine; we'll see, they've said, you'd know.",
    "DON'T SHOUT, We'RE here",
    "héllo wörld — naïve café, Ελληνικά, русский текст, العربية, עברית, हिन्दी, 日本語のテキスト, 한국어",
    "emoji 🤖🚀❤️👨‍👩‍👧‍👦 flags 🇫🇷 skin 👍🏽 and ZWJ sequences",
    "def f(x: int) -> int:\n    return x ** 2  # square\n\n\tif x != 0:\n\t\tprint(f'{x=}')\r\n",
    "spaces:     5 spaces,\t\ttabs\n\n\n\nnewlines   \n  trailing   ",
    "numbers 1 12 123 1234 12345 3.14159 -42 1,000,000 ٣٤٥ ½ Ⅻ 2024-06-01",
    "<|endoftext|> <|start|>user<|message|>special strings are plain text<|end|>",
    "combining: e\u0301 a\u0308 n\u0303 \u0915\u093f \u1100\u1161",
    "   leading spaces and a/path/with/slashes//and\r\n\r\nCRLF",
    "a" * 500 + " " + "ab" * 300 + " " * 100 + "\n" * 20,
    "",
]


@pytest.fixture(scope="module", autouse=True)
def fresh_cache(tmp_path_factory: pytest.TempPathFactory):
    """Every test of this module uses (and may fill) one fresh quickmoe cache directory."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QUICKMOE_CACHE_DIR", str(tmp_path_factory.mktemp("quickmoe-cache")))
        yield


@pytest.fixture(scope="module")
def tok() -> O200kHarmonyTokenizer:
    return O200kHarmonyTokenizer()


@pytest.fixture(scope="module")
def tiktoken_harmony():
    """tiktoken's own o200k_harmony definition, its vocabulary read from the local file (no download)."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken_ext import openai_public

    vocab_file = o200k_base_file()

    def local_ranks(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        assert blobpath.endswith("/o200k_base.tiktoken") and expected_hash == O200K_BASE_SHA256
        return load_mergeable_ranks(vocab_file)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(openai_public, "load_tiktoken_bpe", local_ranks)
        spec = openai_public.o200k_harmony()
    return tiktoken.Encoding(spec["name"], pat_str=spec["pat_str"], mergeable_ranks=spec["mergeable_ranks"],
                             special_tokens=spec["special_tokens"]), spec


@pytest.fixture(scope="module")
def exported_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exported")
    write_tokenizer_files(out)
    return out


def random_texts(count: int, seed: int) -> list[str]:
    """Random strings over ASCII, whitespace of every kind, Latin-1..CJK, emoji, combining marks and
    arbitrary code points (surrogates excluded: they are not text)."""
    rng = random.Random(seed)
    pools = [(0x20, 0x7E), (0xA0, 0x2FFF), (0x3000, 0x9FFF), (0x1F300, 0x1FAFF), (0x300, 0x36F), (0, 0x10FFFF)]
    whitespace = " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000\u200b"
    texts = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(1, 120)):
            if rng.random() < 0.2:
                chars.append(rng.choice(whitespace))
                continue
            low, high = rng.choice(pools)
            code = rng.randint(low, high)
            chars.append(chr(code) if not 0xD800 <= code < 0xE000 else "x")
        texts.append("".join(chars))
    return texts


# -- vocabulary ---------------------------------------------------------------------------------------

def test_vocab_file_is_openai_o200k_base_unpacked_into_the_cache():
    path = o200k_base_file()
    assert path.parent.parent == cache_dir()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == O200K_BASE_SHA256
    assert len(load_mergeable_ranks(path)) == O200K_BASE_NUM_RANKS


def test_special_tokens_and_pattern_match_tiktoken_o200k_harmony(tiktoken_harmony):
    _, spec = tiktoken_harmony
    ours = special_token_names()
    assert spec["pat_str"] == O200K_PATTERN
    assert set(spec["special_tokens"].values()) == set(ours) == set(range(199998, VOCAB_SIZE))
    assert all(spec["special_tokens"][name] == token_id for token_id, name in ours.items())
    for name, token_id in [("<|startoftext|>", 199998), ("<|endoftext|>", 199999), ("<|return|>", 200002),
                           ("<|constrain|>", 200003), ("<|channel|>", 200005), ("<|start|>", 200006),
                           ("<|end|>", 200007), ("<|message|>", 200008), ("<|call|>", 200012),
                           ("<|reserved_200000|>", 200000), ("<|reserved_201087|>", 201087)]:
        assert ours[token_id] == name


# -- the built-in tokenizer -----------------------------------------------------------------------------

def test_published_ids(tok):
    assert tok.encode("Hello world") == [13225, 2375]
    assert tok.encode("hello world") == [24912, 2375]
    assert tok.vocab_size == VOCAB_SIZE == 201088
    assert tok.eos_token_ids == GPT_OSS_EOS_TOKEN_IDS == (200002, 199999, 200012)


@pytest.mark.parametrize("text", SAMPLES)
def test_encode_matches_tiktoken_and_round_trips(tok, tiktoken_harmony, text):
    reference, _ = tiktoken_harmony
    ids = tok.encode(text)
    assert ids == reference.encode_ordinary(text)
    assert tok.decode(ids) == text
    assert tok.decode_bytes(ids) == text.encode("utf-8")


def test_random_unicode_matches_tiktoken_and_round_trips(tok, tiktoken_harmony):
    reference, _ = tiktoken_harmony
    for text in random_texts(1500, seed=0):
        ids = tok.encode(text)
        assert ids == reference.encode_ordinary(text), repr(text)
        assert tok.decode(ids) == text, repr(text)


def test_decode_specials_and_partial_utf8(tok):
    assert tok.decode([200006, 1428, 200008]) == "<|start|>user<|message|>"
    assert tok.decode([200018]) == "<|endofprompt|>"
    ids = tok.encode("🤖")
    assert len(ids) > 1  # one character, several tokens: a prefix ends inside the character
    assert tok.decode_bytes(ids[:1]) == "🤖".encode()[:len(tok.decode_bytes(ids[:1]))]
    assert tok.decode(ids[:1]).endswith("\ufffd")


@pytest.mark.parametrize("bad_id", [VOCAB_SIZE, 10**9, -1])
def test_decode_out_of_range_id_names_it(tok, bad_id):
    with pytest.raises(TokenizerError, match=rf"token id {bad_id}\b"):
        tok.decode([13225, bad_id])


def test_encode_speed(tok):
    text = " ".join(SAMPLES[:8]) * 200
    started = time.perf_counter()
    ids = tok.encode(text)
    seconds = time.perf_counter() - started
    assert len(ids) > 10000 and seconds < 1.0  # measured ~5-8 MB/s: this text takes ~30 ms


# -- harmony chat ----------------------------------------------------------------------------------------

def test_render_chat_hello_world(tok):
    assert tok.render_chat([{"role": "user", "content": "Hello world"}]) == HELLO_WORLD_CHAT_IDS
    assert tok.render_chat([{"role": "user", "content": [{"type": "text", "text": "Hello world"}]}]) \
        == HELLO_WORLD_CHAT_IDS


def test_render_chat_system_becomes_developer_instructions(tok):
    ids = tok.render_chat([{"role": "system", "content": "Answer in French."},
                           {"role": "user", "content": "2+2?"},
                           {"role": "assistant", "content": "4"},
                           {"role": "user", "content": "Thanks"}])
    text = tok.decode(ids)
    assert text.startswith("<|start|>system<|message|>") and "Reasoning: medium" in text
    assert "<|start|>developer<|message|># Instructions\n\nAnswer in French.<|end|>" in text
    assert "<|start|>assistant<|channel|>final<|message|>4<|end|>" in text
    assert text.endswith("<|start|>user<|message|>Thanks<|end|><|start|>assistant")


def test_render_chat_reasoning_effort(tok):
    text = tok.decode(tok.render_chat([{"role": "user", "content": "hi"}], reasoning_effort="high"))
    assert "Reasoning: high" in text


@pytest.mark.parametrize("messages", [[], [{"role": "tool", "content": "x"}], [{"role": "user", "content": 3}],
                                      ["hello"]])
def test_render_chat_rejects_bad_messages(tok, messages):
    with pytest.raises(RequestError, match="messages"):
        tok.render_chat(messages)


def test_chat_stop_tokens_are_harmonys(tok):
    assert tok.chat_stop_token_ids == CHAT_STOP_TOKEN_IDS == (200002, 200012)
    assert set(CHAT_STOP_TOKEN_IDS) == set(harmony_encoding().stop_tokens_for_assistant_actions())


def _harmony_ids(text: str) -> list[int]:
    return harmony_encoding().encode(text, allowed_special="all")


def test_parse_chat_completion_separates_channels(tok):
    ids = _harmony_ids("<|channel|>analysis<|message|>User wants a sum.<|end|>"
                       "<|start|>assistant<|channel|>final<|message|>2+2 = 4.<|return|>")
    assert tok.parse_chat_completion(ids) == [ChatSegment("analysis", "User wants a sum."),
                                              ChatSegment("final", "2+2 = 4.")]
    truncated = ids[:-3]
    assert [s.channel for s in tok.parse_chat_completion(truncated)] == ["analysis", "final"]


def test_parse_chat_completion_tool_call(tok):
    ids = _harmony_ids("<|channel|>commentary to=functions.get_weather <|constrain|>json"
                       '<|message|>{"city":"Paris"}<|call|>')
    assert tok.parse_chat_completion(ids) == [ChatSegment("commentary", '{"city":"Paris"}',
                                                          recipient="functions.get_weather")]


def test_parse_chat_completion_keeps_malformed_text(tok):
    ids = _harmony_ids("<|channel|>analysis<|message|>ok<|end|>") + tok.encode("random words") + [200006]
    segments = tok.parse_chat_completion(ids)
    assert segments[0] == ChatSegment("analysis", "ok")
    assert segments[-1].channel == UNPARSED_CHANNEL and "random words" in segments[-1].text


# -- tokenizer.json export and the HF-backed tokenizer -----------------------------------------------------

def test_export_writes_loadable_files_and_caches(exported_dir, tmp_path):
    assert {p.name for p in exported_dir.iterdir()} >= {"tokenizer.json", "tokenizer_config.json",
                                                        "special_tokens_map.json"}
    config = json.loads((exported_dir / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|return|>" and config["tokenizer_class"] == "PreTrainedTokenizerFast"
    started = time.perf_counter()
    write_tokenizer_files(tmp_path / "again")
    assert time.perf_counter() - started < 0.5  # cached: a copy
    assert (tmp_path / "again" / "tokenizer.json").read_bytes() == (exported_dir / "tokenizer.json").read_bytes()


def test_exported_tokenizer_json_matches_ours_in_tokenizers(tok, exported_dir):
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(str(exported_dir / "tokenizer.json"))
    hf.encode_special_tokens = True
    texts = [t for t in SAMPLES if t] + random_texts(1500, seed=1)
    for text, encoding in zip(texts, hf.encode_batch(texts, add_special_tokens=False)):
        assert encoding.ids == tok.encode(text), repr(text)
    assert hf.get_vocab_size(with_added_tokens=True) == VOCAB_SIZE
    assert hf.decode(tok.encode(SAMPLES[3])) == SAMPLES[3]


def test_exported_tokenizer_loads_in_transformers(tok, exported_dir):
    transformers = pytest.importorskip("transformers")
    for loader in (transformers.AutoTokenizer, transformers.PreTrainedTokenizerFast):
        hf = loader.from_pretrained(exported_dir, local_files_only=True)
        for text in SAMPLES[:8]:
            assert hf.encode(text, add_special_tokens=False) == tok.encode(text), repr(text)
        assert hf.eos_token_id == 200002 and hf.bos_token_id == 199998 and hf.pad_token_id == 199999


def test_load_tokenizer_picks_tokenizer_json(tok, exported_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("QUICKMOE_TOKENIZER_RECOGNITION", "0")  # through `tokenizers` (test_tokenizer_recognition.py)
    hf = load_tokenizer(exported_dir)
    assert isinstance(hf, HFTokenizer) and hf.uses_harmony
    assert hf.vocab_size == VOCAB_SIZE
    assert hf.eos_token_ids == (200002, 199999, 200012)
    for text in SAMPLES + ["lone surrogate \udc80 here"]:
        assert hf.encode(text) == tok.encode(text)
    for text in SAMPLES:
        assert hf.decode(hf.encode(text)) == text
    assert hf.render_chat([{"role": "user", "content": "Hello world"}]) == HELLO_WORLD_CHAT_IDS
    assert hf.chat_stop_token_ids == (200002, 200012)
    assert isinstance(load_tokenizer(tmp_path), O200kHarmonyTokenizer)
    assert isinstance(load_tokenizer(None), O200kHarmonyTokenizer)
    with pytest.raises(TokenizerError, match=r"tokenizer\.json: token id 201093"):
        hf.decode([VOCAB_SIZE + 5])


def test_corrupt_tokenizer_json_names_the_file(tmp_path):
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": ')
    with pytest.raises(TokenizerError, match=r"tokenizer\.json"):
        load_tokenizer(tmp_path)


def test_corrupt_tokenizer_config_names_the_file(exported_dir, tmp_path):
    for name in ("tokenizer.json", "special_tokens_map.json"):
        (tmp_path / name).write_bytes((exported_dir / name).read_bytes())
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(TokenizerError, match=r"tokenizer_config\.json"):
        load_tokenizer(tmp_path)


def test_missing_model_dir():
    with pytest.raises(TokenizerError, match="not a directory"):
        load_tokenizer(Path("/nonexistent/model"))


# -- offline ----------------------------------------------------------------------------------------------

OFFLINE_SCRIPT = textwrap.dedent("""
    import os
    from quickmoe.tokenizer import load_tokenizer
    tok = load_tokenizer(None)
    assert tok.encode("Hello world") == [13225, 2375]
    assert tok.render_chat([{"role": "user", "content": "Hello world"}]) == %r
    assert tok.decode(tok.encode("héllo 🤖")) == "héllo 🤖"
    assert "TIKTOKEN_ENCODINGS_BASE" not in os.environ  # set only while harmony loaded the vocabulary
    print("offline ok")
""" % (HELLO_WORLD_CHAT_IDS,))


def test_works_offline_with_an_empty_cache(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("no_proxy", "tiktoken_encodings_base", "tiktoken_rs_cache_dir")}
    unroutable = "http://127.0.0.1:9"
    env.update(QUICKMOE_CACHE_DIR=str(tmp_path / "cache"), TIKTOKEN_RS_CACHE_DIR=str(tmp_path / "tiktoken-rs"),
               HTTPS_PROXY=unroutable, HTTP_PROXY=unroutable, https_proxy=unroutable, http_proxy=unroutable,
               ALL_PROXY=unroutable, all_proxy=unroutable)
    result = subprocess.run([sys.executable, "-c", OFFLINE_SCRIPT], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "offline ok" in result.stdout
    assert (tmp_path / "cache" / "encodings" / "o200k_base.tiktoken").is_file()


# -- cache directory -----------------------------------------------------------------------------------------

def test_cache_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit" and cache_dir().is_dir()
    monkeypatch.delenv("QUICKMOE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "quickmoe"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "quickmoe"


def test_decode_bytes_of_every_id_is_the_vocabulary_file(tok):
    """The built-in tokenizer looks each base id's bytes up on first use; the reference decodes the whole
    vocabulary file (ranks checked in order) and appends the specials' texts."""
    reference = read_tiktoken_file(o200k_base_file()) + [name.encode() for _, name in
                                                         sorted(special_token_names().items())]
    fresh = O200kHarmonyTokenizer()
    ids = random.Random().sample(range(VOCAB_SIZE), 64)
    assert fresh.decode_bytes(ids) == b"".join(reference[i] for i in ids)
    assert [fresh.decode_bytes([i]) for i in range(VOCAB_SIZE)] == reference


def test_hf_decode_bytes_of_every_id_is_the_o200k_table(tok, exported_dir):
    """HFTokenizer looks each id's bytes up on first use; the reference is O200kHarmonyTokenizer's table, built from
    the tiktoken vocabulary file (not from tokenizer.json)."""
    hf = HFTokenizer(exported_dir)
    ids = random.Random(7).sample(range(VOCAB_SIZE), 50)
    assert hf.decode_bytes(ids) == tok.decode_bytes(ids)
    assert sum(piece is not None for piece in hf._id_to_bytes) == len(ids)  # only what was decoded was looked up
    for start in range(0, VOCAB_SIZE, 4096):
        chunk = list(range(start, min(start + 4096, VOCAB_SIZE)))
        assert [hf.decode_bytes([i]) for i in chunk] == [tok.decode_bytes([i]) for i in chunk], start


def test_hf_decode_bytes_sentencepiece_byte_fallback_and_added_tokens(tmp_path):
    """A SentencePiece-style BPE (U+2581 for spaces, <0xNN> byte-fallback tokens, an added special token): each
    id's bytes against the vocabulary read from the saved tokenizer.json itself."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models

    rng = random.Random(11)
    words = sorted({"".join(rng.choice("abcdeéñ") for _ in range(rng.randint(1, 5))) for _ in range(60)})
    vocab = {"<unk>": 0, **{f"<0x{b:02X}>": 1 + b for b in range(256)}}
    for word in words + ["\u2581" + w for w in words] + ["\u2581"]:
        vocab.setdefault(word, len(vocab))
    hf_tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    hf_tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    hf_tok.add_special_tokens(["<|im_end|>"])
    hf_tok.save(str(tmp_path / "tokenizer.json"))
    hf = load_tokenizer(tmp_path)
    assert isinstance(hf, HFTokenizer) and not hf.uses_harmony
    saved = json.loads((tmp_path / "tokenizer.json").read_text())
    expected = {i: (bytes([int(t[3:5], 16)]) if t.startswith("<0x") else t.replace("\u2581", " ").encode())
                for t, i in saved["model"]["vocab"].items()}
    special = {t["id"]: t["content"].encode() for t in saved["added_tokens"]}
    expected.update(special)
    assert len(expected) == hf.vocab_size
    order = list(expected)
    rng.shuffle(order)
    for i in order:
        assert hf.decode_bytes([i]) == expected[i], i
    assert hf.decode_bytes(order[:40]) == b"".join(expected[i] for i in order[:40])
