"""Opening part of a local model's reply for it: :class:`Steer`, and the prompt a chat model's
turn is continued from.

When the reply reaches one of a steer's headers, the runtime stops the model there, writes the
steer's words after the header as though the model had, and lets the model go on from them in
the same reply. Everything before the header is what the model would have written without the
steer (the same prompt, the same greedy decoding), so only what follows it can change. xlrag
uses it to open a citation reply's explanation in the user's language once the answer line is
written (answer.explanation_opener): an opener in the prompt itself is read before the answer
line and changed a third of them (docs/how-to/answers.md, "The explanation's language").
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from xlrag.errors import ProviderError

if TYPE_CHECKING:
    from llama_cpp.llama_types import ChatCompletionRequestMessage

__all__ = ["ChatPrompt", "Steer", "chat_prompt", "continues_chat"]


class Steer(BaseModel):
    """Where a reply is opened for the model, and with what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at: tuple[str, ...] = Field(min_length=1, description="headers; the first one the reply writes is opened")
    write: str = Field(min_length=1, description="the words written after that header")
    grammar: str | None = Field(None, description="GBNF text of what the model may write after them "
                                                  "(with a grammar-held reply; None: free)")

    def opening(self, text: str) -> int | None:
        """Where in ``text`` the steer's words go: the end of the header that starts first, or
        None while no header is written whole."""
        found = [(text.find(h), -len(h)) for h in self.at if h in text]
        if not found:
            return None
        start, minus = min(found)
        return start - minus


class ChatPrompt(BaseModel):
    """A chat request as llama.cpp's chat completion gives it to the model: the rendered text,
    whether the template wrote the BOS itself, and the stops the template adds."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    text: str
    added_special: bool
    stop: list[str]
    stopping_criteria: Any = None

    def tokens(self, llama: Any, continued: str = "") -> list[int]:
        """The prompt's tokens with ``continued`` (the assistant's reply so far) after it,
        tokenised exactly as llama-cpp-python's chat handler tokenises a prompt."""
        return llama.tokenize((self.text + continued).encode("utf-8"), add_bos=not self.added_special,
                              special=True)


# One formatter per loaded model, built as llama-cpp-python builds its own from the GGUF's
# template (Llama.__init__): weak, so a model dropped from the runtime takes its entry with it.
_FORMATTERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_FORMATTERS_LOCK = threading.Lock()


def continues_chat(llama: Any) -> bool:
    """Whether a chat turn on ``llama`` can be continued: llama.cpp renders its GGUF's own chat
    template (the catalogue's models). A named format, set or recognised by llama.cpp (chatml,
    llama-3, ...), renders in code of its own, whose text this module could not promise to repeat
    byte for byte, so a reply opened there might not begin as the plain one does."""
    template = (getattr(llama, "metadata", None) or {}).get("tokenizer.chat_template")
    return bool(template) and llama.chat_format == "chat_template.default"


def chat_prompt(llama: Any, messages: list[ChatCompletionRequestMessage]) -> ChatPrompt:
    """The prompt ``create_chat_completion`` would give ``llama`` for ``messages``, the
    assistant's turn opened and empty, for a reply to be continued from."""
    if not continues_chat(llama):
        raise ProviderError(f"this local model's chat format ({llama.chat_format}) is not its GGUF's own template, "
                            f"so its reply cannot be continued; set answer.explanation_opener: false")
    with _FORMATTERS_LOCK:
        formatter = _FORMATTERS.get(llama)
        if formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            eos, bos = llama.token_eos(), llama.token_bos()
            formatter = Jinja2ChatFormatter(
                template=llama.metadata["tokenizer.chat_template"],
                eos_token=llama._model.token_get_text(eos) if eos != -1 else "",
                bos_token=llama._model.token_get_text(bos) if bos != -1 else "",
                stop_token_ids=[eos])
            _FORMATTERS[llama] = formatter
    result = formatter(messages=messages)
    stop = [] if result.stop is None else [result.stop] if isinstance(result.stop, str) else list(result.stop)
    return ChatPrompt(text=result.prompt, added_special=result.added_special, stop=stop,
                      stopping_criteria=result.stopping_criteria)
