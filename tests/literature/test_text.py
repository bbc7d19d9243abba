"""Snippets of real PubMedQA abstracts."""

from __future__ import annotations

import re

from clinrag.literature.text import clean, snippet


def test_long_abstracts_are_cut_after_the_last_whole_sentence_that_fits(pubmedqa_records):
    abstracts = [" ".join(r["CONTEXTS"]) for r in pubmedqa_records.values()]
    long_ones = [a for a in abstracts if len(a) > 900][:50]
    assert len(long_ones) == 50
    for abstract in long_ones:
        text = clean(abstract)
        cut = snippet(abstract)
        assert 0 < len(cut) <= 600
        assert text.startswith(cut)
        assert cut[-1] in ".!?" and text[len(cut)].isspace()  # a sentence end, followed by the next
        # the next sentence end lies beyond 600 characters: no longer run of whole sentences would fit
        following = re.search(r"[.!?](?=\s)", text[len(cut) :])
        assert following is None or len(cut) + following.end() > 600


def test_short_text_is_kept_whole_and_one_long_sentence_is_cut_at_a_word():
    assert snippet("Short abstract. Two sentences.") == "Short abstract. Two sentences."
    sentence = "word " * 200
    cut = snippet(sentence, 100)
    assert cut.endswith("…") and len(cut) <= 100 and cut[:-1].split() == ["word"] * 20


def test_inline_markup_is_removed_but_comparisons_are_kept():
    assert clean("Effect of <i>H. pylori</i> on CD4<sup>+</sup> cells (p<0.05, n>30)") == (
        "Effect of H. pylori on CD4+ cells (p<0.05, n>30)"
    )
