"""Multiple-choice questions: the prompt, and the parser that reads a chosen key out of free text."""

from __future__ import annotations

import json
import re

from clinrag.core.errors import AnswerParseError
from clinrag.core.models import Case
from clinrag.tasks.render import case_text, options_block

PROMPT = """Answer the following multiple-choice medical question.

Question: {question}

Options:
{options}

Reply with the letter of the single best option."""


def render_prompt(case: Case) -> str:
    return PROMPT.format(question=case_text(case), options=options_block(case.options))


def parse_choice(text: str, options: dict[str, str]) -> str:
    """The option key a free-text answer commits to. Tries, in order: a JSON `{"answer": ...}`, an explicit
    "answer is X", a reply that starts with a key, exactly one key marked like "X." or "(X)" in the text, and
    exactly one option text quoted in full. Anything else raises `AnswerParseError`."""
    keys = list(options)
    key_pattern = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    stripped = text.strip()

    try:
        answer = json.loads(stripped).get("answer")
        if isinstance(answer, str) and answer.strip() in options:
            return answer.strip()
    except (json.JSONDecodeError, AttributeError):
        pass

    # Only the phrase is case-insensitive: in "the answer is a beta-lactam" the "a" is not option A.
    explicit_keys = set(re.findall(rf"(?i:answer\s*(?:is|:)\s*(?:option\s*)?)\(?({key_pattern})\b", stripped))
    if len(explicit_keys) == 1:
        return explicit_keys.pop()

    leading = re.match(rf"^\(?({key_pattern})(?:[.):\s]|$)", stripped)
    if leading:
        return leading.group(1)

    marked = set(re.findall(rf"(?:^|\s)\(?({key_pattern})[.)]", stripped))
    if len(marked) == 1:
        return marked.pop()

    lowered = stripped.lower()
    quoted = [key for key, option in options.items() if option.lower() in lowered]
    if len(quoted) == 1:
        return quoted[0]

    raise AnswerParseError(f"the answer does not commit to exactly one of the options {keys}", text)
