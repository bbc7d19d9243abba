"""The declarative rewrite agent (DoctorRAG B.3): a multiple-choice question with its correct answer becomes
one declarative statement of the fact it tests (the wrong options are never shown to the model); a text
chunk becomes a list of self-contained declarative statements."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, Field

from clinrag.core.errors import StructuredOutputError
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.structured import complete_structured

MCQ_PROMPT = """Rewrite the exam question and its correct answer as ONE declarative sentence that states the \
medical fact the question tests. Write a statement, not a question. Include the correct answer.

Question: {question}
Correct answer: {answer}

Declarative statement:"""

CHUNK_PROMPT = """Rewrite the medical text below as short declarative statements of fact. Each statement \
must be understandable on its own (name the disease, drug or finding instead of "it"). Use only facts \
from the text.

Text: {text}"""

MIN_STATEMENT_WORDS = 4

RETRY_NOTE = "\n\nYour previous answer was rejected: {reason}. Try again."

_WORD = re.compile(r"[a-z0-9]+")


class _Statements(BaseModel):
    statements: list[str] = Field(min_length=1, max_length=8)


@dataclass(frozen=True)
class Rewrite:
    """The statements produced, or `error` when the agent failed twice (the caller decides what to keep)."""

    statements: list[str]
    error: str | None = None


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def _mcq_problem(statement: str, answer: str) -> str | None:
    """Why a rewritten MCQ statement is unacceptable, or None."""
    if not statement.strip():
        return "the statement is empty"
    if statement.rstrip().endswith("?"):
        return "it is a question, not a statement"
    wanted = _content_words(answer)
    if wanted and len(wanted & _content_words(statement)) < max(1, len(wanted) // 2):
        return f"it does not state the correct answer ({answer})"
    return None


def _first_sentence(text: str) -> str:
    text = text.strip().strip('"').strip()
    match = re.match(r"(.+?[.!])(\s|$)", text, re.DOTALL)
    return (match.group(1) if match else text).strip()


class DeclarativeRewriter:
    def __init__(self, model: ChatModel, max_tokens: int = 96) -> None:
        self.model = model
        self.max_tokens = max_tokens

    def rewrite_mcq(self, question: str, answer: str) -> Rewrite:
        prompt = MCQ_PROMPT.format(question=question.strip(), answer=answer.strip())
        reason = ""
        for attempt in range(2):
            text = prompt + (RETRY_NOTE.format(reason=reason) if attempt else "")
            reply = self.model.chat(text, max_tokens=self.max_tokens, stop=["\n"]).text
            statement = _first_sentence(reply)
            problem = _mcq_problem(statement, answer)
            if problem is None:
                return Rewrite([statement])
            reason = problem
        return Rewrite([], error=f"rewrite rejected twice: {reason}")

    def rewrite_chunk(self, text: str) -> Rewrite:
        request = ChatRequest.of(CHUNK_PROMPT.format(text=text.strip()), max_tokens=self.max_tokens * 3)
        try:
            result, _ = complete_structured(self.model, request, _Statements)
        except StructuredOutputError as exc:
            return Rewrite([], error=f"rewrite failed: {exc}")
        # Fragments ("treatment:") and repeats are what a small model produces when it runs out of facts.
        statements = list(
            dict.fromkeys(
                s.strip()
                for s in result.statements
                if len(s.split()) >= MIN_STATEMENT_WORDS and not s.strip().endswith("?")
            )
        )
        return Rewrite(statements) if statements else Rewrite([], error="rewrite produced no statement")
