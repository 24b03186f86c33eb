"""Chat templates of non-harmony models, rendered as transformers' `apply_chat_template` renders them.

The template is the model directory's `chat_template.jinja`, else `tokenizer_config.json`'s `chat_template`
(a string, or a list of named templates: "default" is used). It runs in jinja2's immutable sandbox with
transformers' settings (trim_blocks, lstrip_blocks, loopcontrols; `tojson` without HTML escaping,
`raise_exception`, `strftime_now`), given `messages`, `add_generation_prompt`, `tools` / `documents` (None)
and the special tokens of tokenizer_config.json / special_tokens_map.json (`bos_token`, `eos_token`, ...), with
extra keyword arguments overriding those. The rendered text is tokenized with the special tokens it
contains recognised and no tokens added (apply_chat_template(tokenize=True)'s defaults).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from quickmoe.errors import TokenizerError
from quickmoe.paths import read_regular

__all__ = ["SPECIAL_TOKEN_KEYS", "ChatTemplate", "load_chat_template"]

SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
TEMPLATE_FILE = "chat_template.jinja"


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


class ChatTemplate:
    """A compiled chat template and the special tokens it is rendered with."""

    def __init__(self, source: str, template: str, special_tokens: Mapping[str, str]) -> None:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self.source = source
        self.special_tokens = dict(special_tokens)

        def raise_exception(message: str) -> None:
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
                   sort_keys: bool = False) -> str:
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            self._template = env.from_string(template)
        except jinja2.exceptions.TemplateError as exc:
            raise TokenizerError(f"{source}: the chat template does not compile ({exc})") from None
        self._errors = (jinja2.exceptions.TemplateError,)

    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
               **kwargs: Any) -> str:
        """The conversation as text; `kwargs` (e.g. enable_thinking=False) are template variables."""
        variables = {**self.special_tokens, **{k: v for k, v in kwargs.items() if v is not None}}
        try:
            return self._template.render(messages=[dict(m) for m in messages], tools=None, documents=None,
                                         add_generation_prompt=add_generation_prompt, **variables)
        except self._errors as exc:
            raise TokenizerError(f"{self.source}: the chat template refused the conversation: {exc}") from None


def load_chat_template(model_dir: Path, tokenizer_config: Mapping[str, Any],
                       special_tokens_map: Mapping[str, Any]) -> ChatTemplate | None:
    """The directory's chat template (chat_template.jinja, else tokenizer_config.json's), or None."""
    path = model_dir / TEMPLATE_FILE
    source = str(path)
    if path.is_file():
        try:
            template: Any = read_regular(path).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenizerError(f"{source}: cannot read the chat template ({exc})") from None
    else:
        template = tokenizer_config.get("chat_template")
        source = str(model_dir / "tokenizer_config.json")
        if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
    if template is None:
        return None
    if not isinstance(template, str):
        raise TokenizerError(f"{source}: chat_template = {template!r}: expected a Jinja template string")
    special = {}
    for key in SPECIAL_TOKEN_KEYS:
        text = _token_text(tokenizer_config.get(key, special_tokens_map.get(key)))
        if text is not None:
            special[key] = text
    return ChatTemplate(source, template, special)
