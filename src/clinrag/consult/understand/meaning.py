"""The meaning fallback of the finding pipeline: a clause whose mentions are less than half of its words is
matched by meaning to the concepts patients have words for ("it burns when I pee" → painful urination): the
best cosine of its embedding with the concept's lay names and shortest names, read as the patient says them
("I have …"). Negation, hedging and someone else's finding come from the same NegEx pipes, run on the clause
between two stand-ins for its finding. The vectors are saved with the pipeline; the embedder is given at run
time (`MeaningPipe.embedder`), and without one the pipe finds nothing."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc, Span

from clinrag.consult.understand.rules import LanguageRules, rules_for
from clinrag.consult.understand.scopes import LABEL, context
from clinrag.consult.understand.vocabulary import Concept, Vocabulary
from clinrag.embed.base import Embedder

# chosen on the development set (`python -m tests.methods.consult.test_findings` prints precision and recall
# per threshold)
SEMANTIC_THRESHOLD = 0.7
NEGATION_MARGIN = 0.03
MAX_FORMS = 3  # surfaces embedded per concept: its lay names, then its shortest names and synonyms
MAX_FORM_WORDS = 4
MIN_CLAUSE_WORDS = 2  # a lone word left by a cut ("arms and legs") says too little


@dataclass(frozen=True)
class Meant:
    concept: str  # concept id
    start: int  # character offsets of the clause
    end: int
    text: str
    status: str
    other: bool = False  # the clause speaks of someone else ("my sister had it")


@Language.factory("clinrag_meaning")
def make_meaning(nlp: Language, name: str, language: str, rules: str) -> MeaningPipe:
    """`language` and `rules` (their fingerprint): the rules the pipe reads (`rules.pipe_config`)."""
    return MeaningPipe(nlp, rules_for(language, rules))


class MeaningPipe:
    """The concepts' embedded forms are the pipe's data, saved with the pipeline; how a text is read by
    them (the embedder, the threshold, the margin) is given with each call, through spaCy's `component_cfg`,
    so one loaded pipeline serves every configuration."""

    def __init__(self, nlp: Language, rules: LanguageRules) -> None:
        self.nlp = nlp
        self.rules = rules
        self.concepts: list[str] = []
        self._starts = np.zeros(0, dtype=int)
        self._vectors = np.zeros((0, 0), dtype=np.float32)

    def fit(self, vocabulary: Vocabulary, embedder: Embedder, lay_names: Iterable[str] | None = None) -> None:
        """Embed the forms of the concepts of `lay_names` (default: every concept of a lay source)."""
        named: dict[str, list[str]] = {}
        if lay_names is None:
            named = {c.id: [] for c in vocabulary.concepts if c.lay}
        else:
            for name in lay_names:
                if (concept := vocabulary.lookup(name)) is not None:
                    named.setdefault(concept.id, []).append(name)
        by_id = {concept.id: concept for concept in vocabulary.concepts}
        statement = self.rules.meaning_frames.statement
        forms: list[str] = []
        starts: list[int] = []
        for concept_id, names in named.items():
            starts.append(len(forms))
            forms.extend(_forms(by_id[concept_id], names))
        self.concepts = list(named)
        self._starts = np.array(starts, dtype=int)
        self._vectors = (
            embedder.encode([statement.format(form) for form in forms]) if forms else self._vectors
        )

    def __call__(
        self,
        doc: Doc,
        embedder: Embedder | None = None,
        threshold: float = SEMANTIC_THRESHOLD,
        margin: float = NEGATION_MARGIN,
    ) -> Doc:
        """`threshold`: the least cosine a clause needs with a concept; `margin`: how much closer the clause
        without its inability word ("I can't sleep") must be for the word to negate it. Without an embedder
        the pipe finds nothing."""
        doc._.meant = self.meant(doc, embedder, threshold, margin) if self.concepts and embedder else []
        return doc

    def scores(self, texts: list[str], embedder: Embedder) -> np.ndarray:
        """(len(texts), len(concepts)) best cosines."""
        return np.maximum.reduceat(embedder.encode(texts) @ self._vectors.T, self._starts, axis=1)

    def meant(self, doc: Doc, embedder: Embedder, threshold: float, margin: float) -> list[Meant]:
        clauses = [clause for clause in self._clauses(doc) if _mentioned_share(clause) < 0.5]
        if not clauses:
            return []
        plain_words = self.rules.plain_words
        inability = self.rules.pattern("inability")
        plain = [
            "".join(plain_words.get(token.lower_, token.text) + token.whitespace_ for token in clause).strip()
            for clause in clauses
        ]
        affirmed = [inability.sub(" ", text) for text in plain]
        texts = list(dict.fromkeys([*plain, *affirmed]))
        scores = self.scores(texts, embedder)
        row = {text: k for k, text in enumerate(texts)}
        found = []
        for clause, text, without in zip(clauses, plain, affirmed, strict=True):
            as_written, without_inability = scores[row[text]], scores[row[without]]
            best = np.maximum(as_written, without_inability)
            index = int(np.argmax(best))
            if best[index] < threshold:
                continue
            cues = context(self.nlp, self._framed(text))
            negated = text == without or without_inability[index] > as_written[index] + margin
            status = (
                "uncertain"
                if any(span._.hedged for span in cues.ents)
                else "absent"
                if (negated and any(span._.negex for span in cues.ents))
                or self.rules.pattern("resolved").search(text)
                else "present"
            )
            other = any(span._.other for span in cues.ents)
            found.append(
                Meant(self.concepts[index], clause.start_char, clause.end_char, clause.text, status, other)
            )
        return found

    def _framed(self, clause: str) -> Doc:
        """The clause between two stand-ins for its finding, as the context pipes' entities."""
        sentinel = self.rules.meaning_frames.sentinel
        doc = self.nlp.make_doc(f"{sentinel} {clause} {sentinel}")
        for token in doc:
            token.is_sent_start = token.i == 0
        doc.ents = [Span(doc, 0, 1, label=LABEL), Span(doc, len(doc) - 1, len(doc), label=LABEL)]
        return doc

    def _clauses(self, doc: Doc) -> list[Span]:
        """Each sentence cut at punctuation and coordinating words ("it burns when I pee" stays whole)."""
        breaks = self.rules.words("clause_breaks")
        clauses = []
        for sentence in doc.sents:
            start = sentence.start
            for token in [*sentence, None]:
                end = sentence.end if token is None else token.i
                if token is not None and token.lower_ not in breaks:
                    continue
                if sum(doc[i].is_alpha for i in range(start, end)) >= MIN_CLAUSE_WORDS:
                    clauses.append(doc[start:end])
                start = end + 1
        return clauses

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> None:
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "vectors.npy", self._vectors)
        (folder / "concepts.json").write_text(
            json.dumps({"concepts": self.concepts, "starts": self._starts.tolist()}), encoding="utf-8"
        )

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> MeaningPipe:
        folder = Path(path)
        self._vectors = np.load(folder / "vectors.npy")
        saved = json.loads((folder / "concepts.json").read_text(encoding="utf-8"))
        self.concepts = saved["concepts"]
        self._starts = np.array(saved["starts"], dtype=int)
        return self


def _forms(concept: Concept, lay_names: list[str]) -> list[str]:
    """The names a patient is likeliest to use for the concept: the lay names first, then the shortest."""
    short = sorted(
        (s for s in concept.surfaces if len(s.split()) <= MAX_FORM_WORDS and not s.endswith("?")),
        key=lambda s: len(s.split()),
    )
    forms = {surface.casefold(): surface for surface in [*lay_names, *short]}
    return list(forms.values())[:MAX_FORMS] or [concept.name]


def _mentioned_share(clause: Span) -> float:
    words = [token for token in clause if token.is_alpha and not token.is_stop]
    return sum(1 for token in words if token.ent_type_) / len(words) if words else 1.0
