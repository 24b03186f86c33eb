"""Generated tokenizers for the synthetic Qwen3-MoE and Mixtral checkpoints: byte-level BPE tokenizer.json files
trained with the `tokenizers` library on a small embedded text, shaped like the families' own (Qwen: 151,643
regular ids, then its special tokens from 151643 <|endoftext|>, 151644 <|im_start|>, 151645 <|im_end|>;
Mixtral: <unk> 0, <s> 1, </s> 2, 32,000 ids), with their chat templates in tokenizer_config.json.

The real vocabularies cannot be downloaded here: the ids above the trained merges are unused filler tokens
(never produced by encoding), so the special ids and the vocabulary sizes are the real ones. A real
checkpoint directory brings its own tokenizer files. Training is deterministic; the tokenizer.json is
cached under <cache>/tokenizers/.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from quickmoe.paths import atomic_copy, atomic_write_bytes, cache_dir

__all__ = ["CHAT_TEMPLATES", "FAMILY_TOKENIZERS", "write_synthetic_tokenizer"]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1  # bump when the written files change
TRAINED_VOCAB = 1024  # merges learnt from the embedded text (before the filler ids)

# Qwen2/Qwen3's pre-tokenizer split (tokenizer.json of the Qwen releases).
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                r"\s+(?!\S)|\s+")
QWEN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                 "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
                 "<tool_response>", "</tool_response>", "<think>", "</think>")
QWEN_CONTROL = 14  # the first 14 (up to <|video_pad|>) are special; the tool/fim/think tokens are plain added tokens

CHAT_TEMPLATES = {
    # ChatML as the Qwen3 releases render it (without tools); enable_thinking=false closes an empty <think>.
    "qwen3-moe": (
        "{%- for message in messages %}"
        "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}"
        "{{- '<|im_start|>assistant\\n' }}"
        "{%- if enable_thinking is defined and enable_thinking is false %}"
        "{{- '<think>\\n\\n</think>\\n\\n' }}"
        "{%- endif %}"
        "{%- endif %}"),
    # mistralai/Mixtral-8x7B-Instruct-v0.1's template.
    "mixtral": (
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
        "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"),
}

# family -> (regular ids, leading specials (ids 0..), trailing specials (ids from the regular size), config)
FAMILY_TOKENIZERS: dict[str, dict[str, Any]] = {
    "qwen3-moe": {"regular": 151643, "leading": (), "trailing": QWEN_SPECIALS, "pattern": QWEN_PATTERN,
                  "config": {"add_bos_token": False, "add_prefix_space": False, "bos_token": None,
                             "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
                             "model_max_length": 131072, "errors": "replace", "split_special_tokens": False}},
    "mixtral": {"regular": 32000, "leading": ("<unk>", "<s>", "</s>"), "trailing": (), "pattern": None,
                "config": {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
                           "unk_token": "<unk>", "pad_token": None, "model_max_length": 32768}},
}

_CORPUS = """\
A mixture of experts replaces one large feed-forward block with many smaller experts and a router that
sends each token to a few of them. The model keeps the knowledge of a large network while every token
pays for only a small part of it. Serving such a model is a question of memory bandwidth: the weights of
the experts a batch touches must stream from memory at every step, and the time to first token depends on
how fast a cold process can read, convert and place those weights on the device.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs! How vexingly quick
daft zebras jump; sphinx of black quartz, judge my vow. 0 1 2 3 4 5 6 7 8 9 10 42 100 2048 65536 3.14159
Hello, world. What is the capital of France? Paris is the capital of France, and Berlin is the capital of
Germany. Tokens, layers, heads, experts, weights, scales, blocks, kernels and caches are the words of this
trade: a kernel reads a block of weights, scales it, multiplies it with the activations and writes the
result. def main(): return [x * x for x in range(10) if x % 2 == 0]  # a comment {"key": "value", "n": 3}
The weather today is sunny with a light wind from the west; tomorrow there will be rain in the morning
and clouds in the afternoon. She said: "I will be there at seven o'clock, don't wait for me." They're
sure it's fine, we've seen it, I'm told you'll agree and he'd know. Numbers like 12,345 and 6.02e23 appear.
Éléphant, naïve café, Straße, smörgåsbord, 東京, 北京, 中文, 日本語, 한국어, Здравствуйте, مرحبا, γειά σου.
"""


def _train(pattern: str | None, leading: tuple[str, ...]) -> dict[str, Any]:
    """A byte-level BPE trained on the embedded text: tokenizer.json as a dict (leading specials first)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pattern is None)
    if pattern is not None:
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False), byte_level])
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=TRAINED_VOCAB + len(leading), special_tokens=list(leading),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS.splitlines(), trainer)
    return json.loads(tok.to_str())


def _added(token_id: int, content: str, special: bool) -> dict[str, Any]:
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def tokenizer_json(family: str) -> dict[str, Any]:
    """The tokenizer.json document of `family` ("qwen3-moe" or "mixtral")."""
    spec = FAMILY_TOKENIZERS[family]
    doc = _train(spec["pattern"], spec["leading"])
    vocab: dict[str, int] = doc["model"]["vocab"]
    filler = 0
    while len(vocab) < spec["regular"]:  # unused ids up to the family's vocabulary size
        vocab[f"<|quickmoe_unused_{filler}|>"] = len(vocab)
        filler += 1
    for i, content in enumerate(spec["trailing"]):
        doc["added_tokens"].append(_added(spec["regular"] + i, content, i < QWEN_CONTROL))
    return doc


def tokenizer_config(family: str) -> dict[str, Any]:
    """tokenizer_config.json: the special tokens and the chat template."""
    spec = FAMILY_TOKENIZERS[family]
    return {"tokenizer_class": "PreTrainedTokenizerFast", **spec["config"], "chat_template": CHAT_TEMPLATES[family],
            "clean_up_tokenization_spaces": False}


def _cached_tokenizer_json(family: str) -> Path:
    path = cache_dir() / "tokenizers" / f"{family}-synthetic-v{FORMAT_VERSION}" / "tokenizer.json"
    if not path.is_file():
        data = json.dumps(tokenizer_json(family), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        atomic_write_bytes(path, data)
        logger.info("generated the synthetic %s tokenizer.json (%.1f MB) at %s", family, len(data) / 1e6, path)
    return path


def write_synthetic_tokenizer(out_dir: Path, family: str) -> None:
    """Write tokenizer.json and tokenizer_config.json of `family` into `out_dir`."""
    if family not in FAMILY_TOKENIZERS:
        raise ValueError(f"family {family!r}: expected one of {sorted(FAMILY_TOKENIZERS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_copy(_cached_tokenizer_json(family), out / "tokenizer.json")
    atomic_write_bytes(out / "tokenizer_config.json",
                       (json.dumps(tokenizer_config(family), indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
