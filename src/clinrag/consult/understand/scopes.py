"""The NegEx scopes of the finding pipeline: one negspacy pipe per ConText category of the language's rules
(denied, hedged, someone else's, excluded), each setting its Span extension on the doc's entities."""

from __future__ import annotations

from typing import Any

from negspacy.negation import Negex  # noqa: F401  (registers the "negex" factory)
from spacy.language import Language
from spacy.tokens import Doc

from clinrag.consult.understand.rules import LanguageRules

LABEL = "FINDING"
# the NegEx pipes: (pipe name, ConText category, the Span extension it sets)
CONTEXT_PIPES = (
    ("negation", "NEGATED_EXISTENCE", "negex"),
    ("hedging", "POSSIBLE_EXISTENCE", "hedged"),
    ("someone_else", "FAMILY", "other"),
    ("exclusion", "EXCLUDED", "excluding"),
)


def add_context(nlp: Language, rules: LanguageRules) -> None:
    for name, category, extension in CONTEXT_PIPES:
        config: dict[str, Any] = {"neg_termset": rules.termsets[category]}
        if extension != "negex":
            config["extension_name"] = extension
        nlp.add_pipe("negex", name=name, config=config)


def context(nlp: Language, doc: Doc) -> Doc:
    """`doc` through the NegEx pipes alone."""
    for name, _, _ in CONTEXT_PIPES:
        doc = nlp.get_pipe(name)(doc)
    return doc
