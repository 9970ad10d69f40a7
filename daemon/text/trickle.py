"""Text that arrives in pieces (an assistant's answer, token by token, over Wyoming's
streaming events or a chunked HTTP body): what of it is complete sentences, ready to be spoken,
and what is held until the rest of its sentence comes. SSML is one document: held whole until
the text ends, as the same SSML sent whole is spoken."""

from __future__ import annotations

from daemon.text.cleaning import complete_sentences_end
from daemon.text.ssml import is_ssml


class TextTrickle:
    def __init__(self, longest: int) -> None:
        self.longest = longest  # a sentence held longer than this is cut at a space
        self.held = ""

    def add(self, text: str) -> None:
        self.held += text

    def ready(self) -> str:
        """The complete sentences held, taken out ("" when there are none yet, and while
        the text is SSML)."""
        if is_ssml(self.held):
            return ""
        end = complete_sentences_end(self.held)
        if end == 0 and len(self.held) > self.longest:
            end = self.held.rfind(" ", 0, self.longest) + 1
        ready, self.held = self.held[:end], self.held[end:]
        return ready

    def rest(self) -> str:
        """All that is held, taken out: the text has ended."""
        rest, self.held = self.held, ""
        return rest
