"""The harmony chat format of gpt-oss, rendered and parsed by openai-harmony, fully offline.

openai-harmony normally downloads o200k_base.tiktoken. Its Rust core reads the environment variable
TIKTOKEN_ENCODINGS_BASE: when set, it loads `$TIKTOKEN_ENCODINGS_BASE/o200k_base.tiktoken` (and checks
its sha256) instead of downloading. We set it to our unpacked copy only while loading the encoding and
restore the previous value afterwards. (TIKTOKEN_RS_CACHE_DIR only matters on the download path.)

Messages are dicts {"role", "content"}, content a string or a list of {"type": "text", "text"} parts:
- "user" -> a user message; "assistant" -> its "reasoning" (if any) on the "analysis" channel, its content on the
  "final" channel, and each of its "tool_calls" ({"id", "function": {"name", "arguments"}}) as a message to
  functions.NAME on the "commentary" channel (<|constrain|>json);
- "tool" -> the result of the call "tool_call_id" (or of the function "name"): a message from functions.NAME to
  the assistant on the "commentary" channel;
- "system" and "developer" -> the instructions of one developer message (joined in order by a blank
  line), as gpt-oss's own chat template maps a system prompt; function `tools` ({"name", "description",
  "parameters"}) go to the same developer message.
Every conversation starts with harmony's system message, as the model card prescribes: its default settings
(model identity, knowledge cutoff, reasoning effort medium unless `reasoning_effort` says otherwise, the three
channels, and where tool calls go when there are tools).
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
from quickmoe.tokenizer.vocab import CALL, END, MESSAGE, RETURN, encodings_dir, o200k_base_file

if TYPE_CHECKING:
    import openai_harmony

logger = logging.getLogger(__name__)

ENCODINGS_BASE_ENV = "TIKTOKEN_ENCODINGS_BASE"
# harmony's stop tokens for assistant actions: <|return|> (final answer done) and <|call|> (tool call).
# <|end|> is not one: it closes the analysis message and the model goes on with the final one.
CHAT_STOP_TOKEN_IDS = (RETURN, CALL)
_MESSAGE_END_IDS = frozenset((END, RETURN, CALL))
UNPARSED_CHANNEL = "unparsed"
ROLES = ("system", "developer", "user", "assistant", "tool")
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


def _checked_messages(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise RequestError("messages: expected a non-empty list of {'role', 'content'} objects")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise RequestError(f"{where} = {message!r}: expected an object with 'role' and 'content'")
        role = message.get("role")
        if role not in ROLES:
            raise RequestError(f"{where}.role = {role!r}: expected one of {list(ROLES)}")
        content = message.get("content")
        text = "" if content is None and role in ("assistant", "tool") else _content_text(content, where)
        # lone surrogates (valid JSON, not UTF-8) become U+FFFD, as the tokenizers make them in a plain prompt
        yield role, replace_lone_surrogates(text), message


def _system_message(reasoning_effort: str | None) -> openai_harmony.Message:
    import openai_harmony as oh

    system = oh.SystemContent.new()
    if reasoning_effort is not None:
        effort = str(reasoning_effort).lower()
        if effort not in REASONING_EFFORTS:
            raise RequestError(f"reasoning_effort = {reasoning_effort!r}: expected one of {list(REASONING_EFFORTS)}")
        system = system.with_reasoning_effort(oh.ReasoningEffort[effort.upper()])
    return oh.Message.from_role_and_content(oh.Role.SYSTEM, system)


def _assistant_messages(text: str, message: Mapping[str, Any], names: dict[str, str],
                        where: str) -> list[openai_harmony.Message]:
    import openai_harmony as oh

    out = []
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    if reasoning:
        out.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, replace_lone_surrogates(str(reasoning)))
                   .with_channel("analysis"))
    if text:
        out.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, text).with_channel("final"))
    for j, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise RequestError(f"{where}.tool_calls[{j}]: expected {{'id', 'function': {{'name', 'arguments'}}}}")
        if isinstance(call.get("id"), str):
            names[call["id"]] = function["name"]
        out.append(oh.Message.from_role_and_content(oh.Role.ASSISTANT, str(function.get("arguments") or "{}"))
                   .with_channel("commentary").with_recipient(f"functions.{function['name']}")
                   .with_content_type("<|constrain|>json"))
    return out


def _tool_message(text: str, message: Mapping[str, Any], names: dict[str, str], where: str) -> openai_harmony.Message:
    import openai_harmony as oh

    call_id = message.get("tool_call_id")
    name = names.get(call_id) if isinstance(call_id, str) else None
    name = name or message.get("name")
    if not isinstance(name, str) or not name:
        raise RequestError(f"{where}.tool_call_id = {call_id!r}: expected the id of a tool call made earlier in the "
                           "conversation")
    return (oh.Message.from_author_and_content(oh.Author.new(oh.Role.TOOL, f"functions.{name}"), text)
            .with_recipient("assistant").with_channel("commentary"))


def _tool_descriptions(tools: Sequence[Mapping[str, Any]]) -> list:
    import openai_harmony as oh

    return [oh.ToolDescription.new(t["name"], t.get("description") or "", parameters=t.get("parameters"))
            for t in tools]


def harmony_conversation(messages: Sequence[Mapping[str, Any]], reasoning_effort: str | None = None,
                         tools: Sequence[Mapping[str, Any]] | None = None) -> openai_harmony.Conversation:
    """The harmony Conversation for chat messages (mapping described in this module's docstring)."""
    import openai_harmony as oh

    instructions: list[str] = []
    turns: list[oh.Message] = []
    names: dict[str, str] = {}  # tool call id -> function name
    for i, (role, text, message) in enumerate(_checked_messages(messages)):
        if role in ("system", "developer"):
            instructions.append(text)
        elif role == "user":
            turns.append(oh.Message.from_role_and_content(oh.Role.USER, text))
        elif role == "assistant":
            turns.extend(_assistant_messages(text, message, names, f"messages[{i}]"))
        else:
            turns.append(_tool_message(text, message, names, f"messages[{i}]"))
    header: list[oh.Message] = [_system_message(reasoning_effort)]
    if instructions or tools:
        developer = oh.DeveloperContent.new()
        if instructions:
            developer = developer.with_instructions("\n\n".join(instructions))
        if tools:
            developer = developer.with_function_tools(_tool_descriptions(tools))
        header.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, developer))
    return oh.Conversation.from_messages(header + turns)


def render_chat(messages: Sequence[Mapping[str, Any]], reasoning_effort: str | None = None,
                tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
    """Token ids of the conversation, ending with <|start|>assistant for the model to complete."""
    import openai_harmony as oh

    conversation = harmony_conversation(messages, reasoning_effort, tools)
    try:
        return list(harmony_encoding().render_conversation_for_completion(conversation, oh.Role.ASSISTANT))
    except oh.HarmonyError as exc:
        raise RequestError(f"messages: openai-harmony cannot render this conversation: {exc}") from exc


def tool_call_prefix(name: str) -> list[int]:
    """What a prompt appends after <|start|>assistant to force a tool call: the header ` to=functions.NAME
    <|channel|>commentary <|constrain|>json<|message|>` (the model writes the arguments), or for name "" only
    ` to=functions` (the model names the function; harmony's tokens split before the dot)."""
    import openai_harmony as oh

    message = (oh.Message.from_role_and_content(oh.Role.ASSISTANT, "").with_channel("commentary")
               .with_recipient(f"functions.{name or 'f'}").with_content_type("<|constrain|>json"))
    ids = list(harmony_encoding().render(message))[2:]  # after <|start|> assistant
    if name:
        return ids[:ids.index(MESSAGE) + 1]
    encoding = harmony_encoding()
    return next(ids[:k] for k in range(1, len(ids)) if encoding.decode(ids[:k]) == " to=functions")


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
