"""Option scoring on a model server, in the three modes a server can support (never one-hot):

- `echo`: each option's log-likelihood as the whole reply, read from the plain completions endpoint with the
  prompt echoed (`echo` + `logprobs`): the rendered chat prompt, then the option and the end-of-turn token.
  It is the quantity the embedded runtime computes, so rankings from the two are comparable.
- `top_logprobs`: options of one or two characters (answer letters) read from the top log-probabilities of
  the first generated token of a chat reply.
- `ranking`: for chat-only servers. The model lists the options best first under a JSON schema (unique items
  of the options' enum, its top k), as the MEDDxAgent and DoctorRAG papers ask their models for a ranked
  differential. The rank rule below turns the lists into a distribution.

The rank rule: in one list of m options, the option at rank r weighs 1/r, and the options not listed share
the weight of rank m + 1 equally; weights are normalised, then averaged over the samples. Log-probabilities
of the result are reported with a token count of 1, so `OptionScores.probabilities` gives the distribution
back under either normalisation.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from clinrag.core.errors import ModelReplyError
from clinrag.core.models import DDX_SIZE
from clinrag.llm.base import ChatRequest, Message
from clinrag.llm.structured import parse_structured

# Letters are scored from the first generated token; servers return at most 20 alternatives a position.
TOP_LOGPROBS = 20


def single_characters(options: list[str]) -> bool:
    return all(len(option) <= 2 for option in options)


# --- echo


def echo_params(model: str, text: str) -> dict[str, Any]:
    return {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0.0, "echo": True, "logprobs": 0}


def plain_params(model: str, text: str) -> dict[str, Any]:
    """A request whose usage counts the prompt's tokens (its reply is not used)."""
    return {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0.0}


def prompt_tokens(response: Any, where: str) -> int:
    try:
        return int(response.usage.prompt_tokens)
    except (AttributeError, TypeError, ValueError) as exc:
        raise ModelReplyError(f"{where} answered a completion without its prompt's token count") from exc


def continuation_logprob(response: Any, tokens: int, where: str) -> float:
    """Σ log P of the last `tokens` prompt tokens of an echoed completion. Counting from the end holds on
    servers that leave special tokens out of the echoed list (llama-cpp-python drops the BOS token's id
    wherever it occurs) as well as on those that list every token."""
    try:
        values = response.choices[0].logprobs.token_logprobs
        generated = int(response.usage.completion_tokens or 0)
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        raise ModelReplyError(f"{where} answered an echo without token log-probabilities") from exc
    end = len(values) - generated
    scored = values[end - tokens : end] if tokens >= 1 and end - tokens >= 0 else []
    if len(scored) != tokens or any(not isinstance(value, int | float) for value in scored):
        raise ModelReplyError(f"{where} echoed {len(values)} log-probabilities, not the {tokens} asked for")
    return float(sum(scored))


# --- top logprobs


def top_logprobs_params(params: dict[str, Any]) -> dict[str, Any]:
    return {**params, "max_tokens": 1, "logprobs": True, "top_logprobs": TOP_LOGPROBS}


def letters_from_top_logprobs(choice: Any, options: list[str], where: str) -> list[float | None] | None:
    """Each option's log-probability as the first token of the reply, None when outside the top; None
    altogether when the server sent no log-probabilities or none of the options."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    found: dict[str, float] = {}
    try:
        for alternative in content[0].top_logprobs or []:
            token = alternative.token.strip()
            if token in options and token not in found:
                found[token] = float(alternative.logprob)
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        raise ModelReplyError(f"{where} answered malformed logprobs: {exc}") from exc
    return [found.get(option) for option in options] if found else None


# --- ranking


class Ranking(BaseModel):
    ranking: list[str]


def ranking_size(options: list[str]) -> int:
    """A ranking lists as many options as a differential (all of them when fewer)."""
    return min(DDX_SIZE, len(options))


def ranking_schema(shown: list[str]) -> dict[str, Any]:
    size = ranking_size(shown)
    return {
        "type": "object",
        "properties": {
            "ranking": {
                "type": "array",
                "items": {"type": "string", "enum": shown},
                "minItems": size,
                "maxItems": size,
            }
        },
        "required": ["ranking"],
        "additionalProperties": False,
    }


def ranking_request(request: ChatRequest, shown: list[str]) -> ChatRequest:
    """The request with an instruction to rank `shown` (the options as `shown_options` writes them)
    appended to its last user message, and the ranking schema."""
    size = ranking_size(shown)
    listing = "\n".join(f"- {option}" for option in shown)
    instruction = (
        f"\n\nRank the {size} most likely of these answers, best first, as JSON "
        f'{{"ranking": [...]}} using the exact texts below:\n{listing}'
    )
    messages = list(request.messages)
    last = max(i for i, message in enumerate(messages) if message.role == "user")
    messages[last] = Message(role="user", content=messages[last].content + instruction)
    tokens = max(64, 24 * size + 32)
    return request.model_copy(
        update={"messages": messages, "json_schema": ranking_schema(shown), "max_tokens": tokens, "stop": []}
    )


def shown_options(options: list[str]) -> list[str]:
    """The options as the model is asked to write them: whitespace collapsed (continuation options lose their
    leading space, a line break inside one is a space) and double quotes as single ones. llama-cpp-python's
    server turns the ranking schema's enum into a grammar that an escaped quote breaks, and then stops
    answering."""
    return [" ".join(option.split()).replace('"', "'") for option in options]


def parsed_ranking(text: str, shown: list[str]) -> list[int]:
    """The option indices a reply ranks, best first: unknown and repeated names dropped."""
    index = {}
    for position, option in enumerate(shown):
        index.setdefault(option, position)
    ranked: list[int] = []
    for name in parse_structured(text, Ranking).ranking:
        position = index.get(name.strip())
        if position is not None and position not in ranked:
            ranked.append(position)
    return ranked


def rank_rule(rankings: list[list[int]], n_options: int) -> list[float]:
    """Log-probabilities of the options from ranked lists of their indices (see the module's rank rule)."""
    if not rankings:
        raise ValueError("the rank rule needs at least one ranking")
    averaged = [0.0] * n_options
    for ranked in rankings:
        weights = [0.0] * n_options
        for rank, position in enumerate(ranked, start=1):
            weights[position] = 1.0 / rank
        unlisted = [position for position in range(n_options) if position not in set(ranked)]
        for position in unlisted:
            weights[position] = 1.0 / (len(ranked) + 1) / len(unlisted)
        total = sum(weights)
        for position, weight in enumerate(weights):
            averaged[position] += weight / total / len(rankings)
    return [math.log(p) if p > 0 else -math.inf for p in averaged]
