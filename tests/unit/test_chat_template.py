"""Chat templates of non-harmony models (tokenizer/chat_template.py) against transformers' own
`apply_chat_template` on the same tokenizer files: the same text, the same ids."""

from __future__ import annotations

import json

import pytest

from quickmoe.errors import TokenizerError
from quickmoe.tokenizer import load_tokenizer
from quickmoe.tokenizer.synthetic_bpe import write_synthetic_tokenizer

CONVERSATIONS = {
    "qwen3-moe": [
        [{"role": "user", "content": "Hello world"}],
        [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is MoE? Ünïcödé 東京"},
         {"role": "assistant", "content": "Experts.\nMany."}, {"role": "user", "content": "And <|im_end|> here?"}],
    ],
    "mixtral": [
        [{"role": "user", "content": "Hello world"}],
        [{"role": "user", "content": "What is MoE?"}, {"role": "assistant", "content": "Experts."},
         {"role": "user", "content": "  spaced\ttext\n"}],
    ],
}


@pytest.fixture(scope="module", params=sorted(CONVERSATIONS))
def family_dir(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    write_synthetic_tokenizer(out, request.param)
    return request.param, out


def _hf_tokenizer(path):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(path)


def test_rendered_chat_equals_transformers_apply_chat_template(family_dir):
    family, path = family_dir
    ours, hf = load_tokenizer(path), _hf_tokenizer(path)
    assert not ours.uses_harmony
    for messages in CONVERSATIONS[family]:
        text = ours.chat_template.render(messages, add_generation_prompt=True)
        assert text == hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        want = hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        assert ours.render_chat(messages) == list(want["input_ids"])
    special = {"qwen3-moe": ("<|im_start|>", 151644), "mixtral": ("<s>", 1)}[family]
    assert special[1] in ours.render_chat(CONVERSATIONS[family][0])  # template tokens are special tokens...
    assert ours.encode(special[0]) != [special[1]]  # ... while plain encoding keeps them text


def test_template_errors_are_tokenizer_errors_naming_the_file(family_dir):
    family, path = family_dir
    tok = load_tokenizer(path)
    if family == "mixtral":
        with pytest.raises(TokenizerError, match="tokenizer_config.json.*roles must alternate"):
            tok.render_chat([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


def test_chat_template_jinja_file_wins_and_uses_transformers_filters(tmp_path):
    write_synthetic_tokenizer(tmp_path, "qwen3-moe")
    template = ("{% for m in messages %}{% if loop.index0 > 2 %}{% break %}{% endif %}{{ m | tojson }}|"
                "{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    (tmp_path / "chat_template.jinja").write_text(template)
    messages = [{"role": "user", "content": f"é {i} <tag>"} for i in range(5)]
    ours, hf = load_tokenizer(tmp_path), _hf_tokenizer(tmp_path)
    text = ours.chat_template.render(messages)
    assert text == hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text.count("|<|im_end|>") == 3 and '"é 0 <tag>"' in text  # break; no HTML escaping; eos_token given


def test_no_template_is_a_clear_error(tmp_path):
    write_synthetic_tokenizer(tmp_path, "mixtral")
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(TokenizerError, match="no chat template"):
        load_tokenizer(tmp_path).render_chat([{"role": "user", "content": "hi"}])
