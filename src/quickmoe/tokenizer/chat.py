"""The harmony chat format of gpt-oss, rendered and parsed by openai-harmony, fully offline.

openai-harmony normally downloads o200k_base.tiktoken. Its Rust core reads the environment variable
TIKTOKEN_ENCODINGS_BASE: when set, it loads `$TIKTOKEN_ENCODINGS_BASE/o200k_base.tiktoken` (and checks
its sha256) instead of downloading. We set it to our unpacked copy only while loading the encoding and
restore the previous value afterwards. (TIKTOKEN_RS_CACHE_DIR only matters on the download path.)

Messages are dicts {"role", "content"}, content a string or a list of {"type": "text", "text"} parts:
- "user" -> a user message; "assistant" -> an assistant message on the "final" channel;
- "system" and "developer" -> the instructions of one developer message (joined in order by a blank
  line), as gpt-oss's own chat template maps a system prompt. A developer message is preceded by
  harmony's system message with its default settings (model identity, knowledge cutoff, reasoning
  effort medium, the three channels), which is what gives the instructions their context.
- Without system/developer messages and without `reasoning_effort`, nothing else is added: the user
  message "Hello world" renders to <|start|>user<|message|>Hello world<|end|><|start|>assistant.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from quickmoe.errors import RequestError, TokenizerError
from quickmoe.tokenizer.text import replace_lone_surrogates
from quickmoe.tokenizer.vocab import CALL, END, RETURN, encodings_dir, o200k_base_file

if TYPE_CHECKING:
    import openai_harmony

logger = logging.getLogger(__name__)

ENCODINGS_BASE_ENV = "TIKTOKEN_ENCODINGS_BASE"
# harmony's stop tokens for assistant actions: <|return|> (final answer done) and <|call|> (tool call).
# <|end|> is not one: it closes the analysis message and the model goes on with the final one.
CHAT_STOP_TOKEN_IDS = (RETURN, CALL)
_MESSAGE_END_IDS = frozenset((END, RETURN, CALL))
UNPARSED_CHANNEL = "unparsed"
ROLES = ("system", "developer", "user", "assistant")
REASONING_EFFORTS = ("low", "medium", "high")

_load_lock = threading.Lock()


@dataclass(frozen=True)
class ChatSegment:
    """One message of an assistant completion: its channel ("analysis", "final", "commentary"; a
    message without a channel counts as "final"; UNPARSED_CHANNEL holds tokens that do not follow the
    harmony format), its text, and its recipient (a tool call's target, e.g. "functions.get_weather")."""

    channel: str
    text: str
    recipient: str | None = None


@lru_cache(maxsize=1)
def harmony_encoding() -> openai_harmony.HarmonyEncoding:
    """openai-harmony's gpt-oss encoding, loaded from the local o200k_base file (never downloaded)."""
    import openai_harmony as oh

    vocab_file = o200k_base_file()
    with _load_lock:
        previous = os.environ.get(ENCODINGS_BASE_ENV)
        os.environ[ENCODINGS_BASE_ENV] = str(encodings_dir())
        try:
            return oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)
        except oh.HarmonyError as exc:
            raise TokenizerError(f"openai-harmony could not load the vocabulary {vocab_file} "
                                 f"(expected o200k_base.tiktoken with sha256 checked by harmony): {exc}") from exc
        finally:
            if previous is None:
                del os.environ[ENCODINGS_BASE_ENV]
            else:
                os.environ[ENCODINGS_BASE_ENV] = previous


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = []
        for j, part in enumerate(content):
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type", "text") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise RequestError(f"{where}.content[{j}] = {part!r}: expected {{'type': 'text', 'text': str}}")
        return "".join(texts)
    raise RequestError(f"{where}.content = {content!r}: expected a string or a list of text parts")


def _checked_messages(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, str]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise RequestError("messages: expected a non-empty list of {'role', 'content'} objects")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise RequestError(f"{where} = {message!r}: expected an object with 'role' and 'content'")
        role = message.get("role")
        if role not in ROLES:
            raise RequestError(f"{where}.role = {role!r}: expected one of {list(ROLES)}")
        # lone surrogates (valid JSON, not UTF-8) become U+FFFD, as the tokenizers make them in a plain prompt
        yield role, replace_lone_surrogates(_content_text(message.get("content"), where))


def _system_message(reasoning_effort: str | None) -> openai_harmony.Message:
    import openai_harmony as oh

    system = oh.SystemContent.new()
    if reasoning_effort is not None:
        effort = str(reasoning_effort).lower()
        if effort not in REASONING_EFFORTS:
            raise RequestError(f"reasoning_effort = {reasoning_effort!r}: expected one of {list(REASONING_EFFORTS)}")
        system = system.with_reasoning_effort(oh.ReasoningEffort[effort.upper()])
    return oh.Message.from_role_and_content(oh.Role.SYSTEM, system)


def harmony_conversation(messages: Sequence[Mapping[str, Any]],
                         reasoning_effort: str | None = None) -> openai_harmony.Conversation:
    """The harmony Conversation for chat messages (mapping described in this module's docstring)."""
    import openai_harmony as oh

    instructions: list[str] = []
    turns: list[oh.Message] = []
    for role, text in _checked_messages(messages):
        if role in ("system", "developer"):
            instructions.append(text)
        elif role == "user":
            turns.append(oh.Message.from_role_and_content(oh.Role.USER, text))
        else:
            turns.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, text).with_channel("final"))
    header: list[oh.Message] = []
    if instructions or reasoning_effort is not None:
        header.append(_system_message(reasoning_effort))
    if instructions:
        developer = oh.DeveloperContent.new().with_instructions("\n\n".join(instructions))
        header.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, developer))
    return oh.Conversation.from_messages(header + turns)


def render_chat(messages: Sequence[Mapping[str, Any]], reasoning_effort: str | None = None) -> list[int]:
    """Token ids of the conversation, ending with <|start|>assistant for the model to complete."""
    import openai_harmony as oh

    conversation = harmony_conversation(messages, reasoning_effort)
    try:
        return list(harmony_encoding().render_conversation_for_completion(conversation, oh.Role.ASSISTANT))
    except oh.HarmonyError as exc:
        raise RequestError(f"messages: openai-harmony cannot render this conversation: {exc}") from exc


def _segments(messages: Sequence[openai_harmony.Message]) -> list[ChatSegment]:
    return [ChatSegment(channel=m.channel or "final", recipient=m.recipient,
                        text="".join(getattr(part, "text", "") for part in m.content))
            for m in messages]


def parse_chat_completion(token_ids: Sequence[int]) -> list[ChatSegment]:
    """Split the tokens an assistant generated after <|start|>assistant into its messages.

    E.g. <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...<|return|>
    -> [ChatSegment("analysis", ...), ChatSegment("final", ...)]. A completion cut short (max tokens)
    keeps its partial last message. Tokens that break the format (a model that is not gpt-oss, random
    weights) end the parse: their text, special tokens left out, becomes one UNPARSED_CHANNEL segment.
    """
    import openai_harmony as oh

    encoding = harmony_encoding()
    parser = oh.StreamableParser(encoding, oh.Role.ASSISTANT, strict=False)
    ids = [int(t) for t in token_ids]
    last_message_end = 0
    try:
        for position, token in enumerate(ids):
            parser.process(token)
            if token in _MESSAGE_END_IDS:
                last_message_end = position + 1
        parser.process_eos()
    except oh.HarmonyError as exc:
        logger.debug("completion is not in the harmony format (%s); keeping its text unparsed", exc)
        segments = _segments(parser.messages)
        rest = encoding.decode([t for t in ids[last_message_end:] if not encoding.is_special_token(t)])
        if rest:
            segments.append(ChatSegment(channel=UNPARSED_CHANNEL, text=rest))
        return segments
    return _segments(parser.messages)
