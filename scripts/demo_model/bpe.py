"""The demo model's tokenizer: a byte-level BPE (`tokenizers`) trained on the training files, special token
<|endoftext|> at id 0 (between files: the model's eos and pad)."""

from __future__ import annotations

import json
from typing import Any

from corpus import SourceFile

EOS = "<|endoftext|>"
# A chat template for /v1/chat/completions on a code model: the messages as Python comments, then the answer.
CHAT_TEMPLATE = ("{%- for message in messages %}{{- '# ' + message['role'] + ': ' + message['content'] + '\\n' }}"
                 "{%- endfor %}{%- if add_generation_prompt %}{{- '# assistant:\\n' }}{%- endif %}")


def train_tokenizer(files: list[SourceFile], vocab_size: int) -> Any:
    """A tokenizers.Tokenizer: GPT-2's byte-level pre-tokenization, `vocab_size` ids in all. Deterministic."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator((f.text for f in files), trainer)
    return tok


def tokenizer_config() -> dict[str, Any]:
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": EOS, "pad_token": EOS,
            "unk_token": None, "add_bos_token": False, "add_prefix_space": False, "model_max_length": 4096,
            "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False}


def tokenizer_json(tok: Any) -> dict[str, Any]:
    return json.loads(tok.to_str())
