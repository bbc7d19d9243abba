"""The rank rule and the echo arithmetic of server scoring, on replies shaped as the servers send them."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from clinrag.core.errors import ModelReplyError
from clinrag.llm.server_scoring import continuation_logprob, parsed_ranking, rank_rule


def _probabilities(logprobs: list[float]) -> list[float]:
    return [math.exp(value) for value in logprobs]


def test_a_full_ranking_weighs_rank_r_by_one_over_r() -> None:
    # Option 2 first (1), option 0 second (1/2), option 1 third (1/3); the total is 11/6.
    assert _probabilities(rank_rule([[2, 0, 1]], 3)) == pytest.approx([3 / 11, 2 / 11, 6 / 11])


def test_unlisted_options_share_the_next_rank() -> None:
    # Listed: 1 and 1/2; the three unlisted share 1/3 (1/9 each); total 11/6.
    probabilities = _probabilities(rank_rule([[3, 1]], 5))
    assert probabilities == pytest.approx([2 / 33, 3 / 11, 2 / 33, 6 / 11, 2 / 33])
    assert sum(probabilities) == pytest.approx(1.0)


def test_samples_are_averaged() -> None:
    averaged = _probabilities(rank_rule([[0, 1], [1, 0]], 2))
    assert averaged == pytest.approx([0.5, 0.5])


def test_a_ranking_keeps_known_names_once_in_order() -> None:
    shown = ["Asthma", "Pneumonia", "Bronchitis"]
    reply = '{"ranking": ["Pneumonia", "Gout", "Pneumonia", " Asthma"]}'
    assert parsed_ranking(reply, shown) == [1, 0]


def _echoed(logprobs: list[float | None], completion_tokens: int = 1) -> SimpleNamespace:
    return SimpleNamespace(
        choices=[SimpleNamespace(logprobs=SimpleNamespace(token_logprobs=logprobs))],
        usage=SimpleNamespace(completion_tokens=completion_tokens),
    )


def test_the_continuation_is_counted_from_the_end_before_the_generated_token() -> None:
    # Prompt tokens (first one unscored), two option tokens, one generated token.
    reply = _echoed([None, -1.0, -2.0, -0.5, -0.25, -9.0])
    assert continuation_logprob(reply, 2, "the server") == pytest.approx(-0.75)


def test_an_echo_shorter_than_the_continuation_is_a_reply_error() -> None:
    with pytest.raises(ModelReplyError, match="not the 3 asked for"):
        continuation_logprob(_echoed([None, -1.0, -9.0]), 3, "the server")
