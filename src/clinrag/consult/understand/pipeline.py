"""The finding extractor's spaCy pipeline, built once from a vocabulary and a language's rules (`rules`) and
saved with `nlp.to_disk`:

    concepts (SpanRuler: every surface form and lay phrase, pattern id = concept id) → sentencizer
    → asides (mentions a parenthetical aside interrupts) → constructions (cue word + body part)
    → resolve (`filter_spans`: the longest mention wins) → readings (a measured value: "temperature 38.7")
    → negation, hedging, someone_else, exclusion
    (negspacy NegEx scopes from the ConText rules) → meaning (a clause no phrase matched, by embedding)
    → demographics (age, sex, duration, onset).

Candidate mentions gather in `doc.spans["candidates"]`; the resolved ones are `doc.ents`, each with its
concept id as `span.id_`. The rule targets (names) are resolved to concept ids when the pipeline is built,
so loading it needs no vocabulary lookup."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import spacy
import srsly
from spacy.language import Language
from spacy.pipeline.span_ruler import SpanRuler
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from clinrag.consult.understand.demographics import Demographics
from clinrag.consult.understand.meaning import MeaningPipe  # noqa: F401  (registers the "clinrag_meaning" factory)
from clinrag.consult.understand.readings import ReadingsPipe  # noqa: F401  (registers "clinrag_readings")
from clinrag.consult.understand.rules import Construction, LanguageRules, pipe_config, rules_for
from clinrag.consult.understand.scopes import LABEL, add_context
from clinrag.consult.understand.vocabulary import Vocabulary

CANDIDATES = "candidates"
PHRASES = "phrases.msgpack"
LAY_WINDOW = 8  # tokens between a cue word and its body part ("pain on the right side of my chest")

for _name in ("age", "sex", "duration", "onset", "subject", "self_told"):
    Doc.set_extension(_name, default=None, force=True)
Doc.set_extension("meant", default=[], force=True)


def build_pipeline(vocabulary: Vocabulary, rules: LanguageRules) -> Language:
    """The pipeline for `vocabulary` in the rules' language (its meaning pipe is empty until fitted)."""
    nlp = spacy.blank(rules.spacy_language)
    # the ruler comes first: loading it tokenizes its patterns through the pipes before it
    ruler = nlp.add_pipe("clinrag_concepts", name="concepts")
    everyday = rules.words("everyday")
    surfaces = {key: c.id for key, c in vocabulary.surfaces().items() if key not in everyday}
    # the normalised form drops accents ("diarrhée" → "diarrhee"): such a name is also matched as written
    for concept in vocabulary.concepts:
        for written in concept.surfaces:
            if not written.isascii() and vocabulary.lookup(written) is concept:
                surfaces.setdefault(written.casefold(), concept.id)
    for phrase, names in rules.lay_phrases.items():
        if phrase not in surfaces and (concept := vocabulary.first_known(names)) is not None:
            surfaces[phrase] = concept.id
    ruler.add_patterns(
        [{"label": LABEL, "pattern": text, "id": concept} for text, concept in surfaces.items()]
    )
    nlp.add_pipe("sentencizer")
    # each pipe that reads the rules is given them by its config (their language and fingerprint), saved
    # with the pipeline
    config = pipe_config(rules)
    nlp.add_pipe("clinrag_asides", name="asides", config=config)
    constructions = nlp.add_pipe("clinrag_constructions", name="constructions", config=config)
    constructions.resolve(vocabulary, rules)
    nlp.add_pipe("clinrag_resolve", name="resolve")
    readings = nlp.add_pipe("clinrag_readings", name="readings", config=config)
    readings.resolve(vocabulary)
    add_context(nlp, rules)
    nlp.add_pipe("clinrag_meaning", name="meaning", config=config)
    nlp.add_pipe("clinrag_demographics", name="demographics", config=config)
    return nlp


@Language.factory("clinrag_concepts")
def make_concepts(nlp: Language, name: str) -> ConceptRuler:
    return ConceptRuler(nlp, name, spans_key=CANDIDATES, phrase_matcher_attr="LOWER")


class ConceptRuler(SpanRuler):
    """spaCy's SpanRuler, saved with its phrases as its phrase matcher keeps them (the hashes of their
    tokens' lower-case forms), so loading it tokenizes no pattern again (the vocabulary's ~40,000 phrases
    take about a second to tokenize)."""

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> None:
        super().to_disk(path, exclude=exclude)
        keyed: dict[str, list[list[int]]] = {}
        texts = [entry["pattern"] for entry in self._patterns]
        for entry, doc in zip(self._patterns, self.nlp.tokenizer.pipe(texts), strict=True):
            key = repr((entry["label"], entry.get("id", "")))  # the key SpanRuler gives the matcher
            keyed.setdefault(key, []).append([token.lower for token in doc])
        labels = [[entry["label"], entry["id"]] for entry in self._match_label_id_map.values()]
        keys = [self.nlp.vocab.strings[key] for key in self._match_label_id_map]
        phrases = {"keys": keys, "labels": labels, "phrases": [keyed[key] for key in keys]}
        srsly.write_msgpack(Path(path) / PHRASES, phrases)

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> ConceptRuler:
        folder = Path(path)
        self.clear()
        saved = srsly.read_msgpack(folder / PHRASES)
        vocab = self.nlp.vocab
        # The matcher makes a lexeme of each key, a string no text holds, so its lexical attributes (word
        # shape, norm…) are never read: skipping them is most of the load's time.
        getters, vocab.lex_attr_getters = vocab.lex_attr_getters, None
        try:
            for key, phrases in zip(saved["keys"], saved["phrases"], strict=True):
                self.phrase_matcher.add(key, phrases)
        finally:
            vocab.lex_attr_getters = getters
        self._match_label_id_map = {
            vocab.strings[key]: {"label": label, "id": id_}
            for key, (label, id_) in zip(saved["keys"], saved["labels"], strict=True)
        }
        self._patterns = list(srsly.read_jsonl(folder / "patterns"))
        return self


@Language.factory("clinrag_asides")
def make_asides(nlp: Language, name: str, language: str, rules: str) -> AsidesPipe:
    return AsidesPipe(nlp, rules_for(language, rules))


class AsidesPipe:
    """The mentions a parenthetical aside interrupts ("diffuse (widespread) muscle pain"): matched in the text
    without its asides, and mapped back to the tokens of the text as written."""

    def __init__(self, nlp: Language, rules: LanguageRules) -> None:
        self.nlp = nlp
        self.aside = rules.pattern("aside")

    def __call__(self, doc: Doc) -> Doc:
        asides = [(m.start(), m.end()) for m in self.aside.finditer(doc.text)]
        if not asides:
            return doc
        bounds = [0, *(i for aside in asides for i in aside), len(doc.text)]
        kept = list(zip(bounds[::2], bounds[1::2], strict=True))
        plain = self.nlp.make_doc("".join(doc.text[start:end] for start, end in kept))
        origin = [i for start, end in kept for i in range(start, end)]  # plain character → written one
        found = list(doc.spans[CANDIDATES])
        for match in self.nlp.get_pipe("concepts").match(plain):
            first, last = origin[match.start_char], origin[match.end_char - 1]
            if last - first + 1 == match.end_char - match.start_char:
                continue  # no aside inside: the text as written has this mention already
            span = doc.char_span(first, last + 1, alignment_mode="expand")
            if span is not None:
                found.append(Span(doc, span.start, span.end, label=LABEL, span_id=match.id_))
        doc.spans[CANDIDATES] = found
        return doc


@Language.factory("clinrag_constructions")
def make_constructions(nlp: Language, name: str, language: str, rules: str) -> ConstructionsPipe:
    return ConstructionsPipe(rules_for(language, rules))


class ConstructionsPipe:
    """Lay constructions: a cue word near a body part names the part's finding ("pain on the right side of my
    chest" is chest pain: a part "of" another part is the other part; "… when I breathe" makes it pleuritic),
    as do the parts listed after it ("pain in my left tonsil and my throat"); a cue word with a word of a
    class near it ("coughing up blood"). Every target is a concept id, resolved from the rules' names at
    build."""

    def __init__(self, rules: LanguageRules) -> None:
        self.rules = rules
        self.resolved: dict[str, Any] = {}

    def resolve(self, vocabulary: Vocabulary, rules: LanguageRules) -> None:
        """The constructions' targets as concept ids (first known name wins), with the one-word body sites
        of the knowledge's site findings added to their parts and preferred there ("pain in my tonsil" is
        DDXPlus' tonsil pain, a swollen ankle its ankle swelling)."""
        sites: dict[str, dict[str, str]] = {}
        for concept in vocabulary.concepts:
            if concept.site is not None:
                site, kind = concept.site
                sites.setdefault(kind, {}).setdefault(site, concept.id)

        def first(names: Iterable[str]) -> str | None:
            concept = vocabulary.first_known(tuple(names))
            return concept.id if concept is not None else None

        self.resolved = {
            "constructions": [
                {
                    "parts": {
                        part: concept
                        for part, names in construction.parts.items()
                        if (concept := first(names)) is not None
                    }
                    | sites.get(construction.site or "", {}),
                    "default": first(construction.default),
                    "refine": [first(r.targets) for r in construction.refine],
                }
                for construction in rules.constructions
            ],
            "nearby": [first(n.targets) for n in rules.nearby],
        }

    def __call__(self, doc: Doc) -> Doc:
        found: list[Span] = []
        for sentence in doc.sents:
            words = [token.lower_ for token in sentence]
            for i, word in enumerate(words):
                for construction, resolved in zip(
                    self.rules.constructions, self.resolved["constructions"], strict=True
                ):
                    if word in self.rules.words(construction.cues):
                        found += self._body_finding(sentence, words, i, construction, resolved)
                found += self._nearby(sentence, words, i)
        # first, so that of two mentions of one extent the construction's wins: it has read the body part
        # named before its cue ("my lips are swelling" is a swollen lip, not a swelling)
        doc.spans[CANDIDATES] = found + list(doc.spans[CANDIDATES])
        return doc

    def _body_finding(
        self, sentence: Span, words: list[str], i: int, construction: Construction, resolved: dict[str, Any]
    ) -> list[Span]:
        parts: dict[str, str] = resolved["parts"]
        low, high = max(0, i - LAY_WINDOW), min(len(words), i + LAY_WINDOW + 1)
        # a part after the cue belongs to it only within its clause ("it doesn't hurt and my eyes aren't
        # red"); one before may be across ("my knee is swollen and it hurts")
        ahead = self._clause_end(words, i + 1, high)
        nearby = [j for j in range(low, ahead) if words[j] in parts and j != i]
        j = self._part_of(words, min(nearby, key=lambda k: abs(k - i)), parts) if nearby else None
        if j is None:
            default = resolved["default"]
            return [self._span(sentence, i, i + 1, default)] if default else []
        concept = parts[words[j]]
        # The cue starts the mention: a part named before it may carry two findings ("my calf is swollen and
        # it hurts"), and a denial between them is then before the mention ("my chest doesn't hurt"); but a
        # part just before its cue is one compound with it ("chest tightness", "ear ache"), read as one.
        start, end = (j if j == i - 1 else i), max(i, j) + 1
        for refinement, refined in zip(construction.refine, resolved["refine"], strict=True):
            if refinement.part != words[j] or refined is None:
                continue
            if refinement.before is not None:
                before = set(words[max(0, j - refinement.within) : j])
                if before & self.rules.words(refinement.before):
                    concept = refined
            elif refinement.after is not None:  # within its clause: "… and I can't breathe" is another
                after = self.rules.words(refinement.after)
                stop = self._clause_end(words, end, min(len(words), end + refinement.within))
                hits = [k for k in range(end, stop) if words[k] in after]
                if hits:
                    concept = refined
                    end = hits[0] + 1 if refinement.extend else end
        found = [self._span(sentence, start, end, concept)]
        glue = self.rules.words("list_glue") | self.rules.words("determiners")
        k = j + 1
        while j > i and k < len(words) and (words[k] in glue or words[k] in parts):
            if words[k] in parts:
                found.append(self._span(sentence, k, k + 1, parts[words[k]]))
            k += 1
        return found

    def _nearby(self, sentence: Span, words: list[str], i: int) -> list[Span]:
        for rule, concept in zip(self.rules.nearby, self.resolved["nearby"], strict=True):
            if concept is None or words[i] not in self.rules.words(rule.cues):
                continue
            # ahead of the cue, the window ends with its clause ("a cough, and my nose runs green")
            stop = self._clause_end(words, i + 1, min(len(words), i + rule.after + 1))
            window = range(max(0, i - rule.before), stop)
            near = [j for j in window if words[j] in self.rules.words(rule.words)]
            if rule.followed_by is not None:
                then = self.rules.words(rule.followed_by)
                near = [j for j in near if j + 1 < len(words) and words[j + 1] in then]
            if near and rule.cue_only:
                return [self._span(sentence, i, i + 1, concept)]
            if near:
                return [self._span(sentence, min(i, near[0]), max(i, near[-1]) + 1, concept)]
        return []

    def _clause_end(self, words: list[str], start: int, stop: int) -> int:
        """The first word from `start` that ends a clause, or `stop` when none does before it."""
        return next((k for k in range(start, stop) if self._ends_clause(words, k)), stop)

    def _ends_clause(self, words: list[str], k: int) -> bool:
        """Whether `words[k]` ends a clause: punctuation or a conjunction, but not one between sides ("my
        right and left ear")."""
        if words[k] not in self.rules.words("clause_ends"):
            return False
        sides = self.rules.words("sides")
        return not (0 < k < len(words) - 1 and words[k - 1] in sides and words[k + 1] in sides)

    def _part_of(self, words: list[str], j: int, parts: dict[str, str]) -> int | None:
        """`j`, or the part it is a region of ("the back of my head" → head); None when that is not a part
        the construction knows."""
        if j + 1 >= len(words) or words[j + 1] != "of":
            return j
        k = j + 2 + (j + 2 < len(words) and words[j + 2] in self.rules.words("determiners"))
        return k if k < len(words) and words[k] in parts else None

    @staticmethod
    def _span(sentence: Span, start: int, end: int, concept: str) -> Span:
        return Span(sentence.doc, sentence.start + start, sentence.start + end, label=LABEL, span_id=concept)

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "resolved.json").write_text(json.dumps(self.resolved), encoding="utf-8")

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> ConstructionsPipe:
        self.resolved = json.loads((Path(path) / "resolved.json").read_text(encoding="utf-8"))
        return self


@Language.component("clinrag_resolve")
def resolve_mentions(doc: Doc) -> Doc:
    """The longest candidate wins, then the earliest (`filter_spans`); the winners are the doc's entities."""
    doc.ents = filter_spans(doc.spans[CANDIDATES])
    return doc


@Language.factory("clinrag_demographics")
def make_demographics(nlp: Language, name: str, language: str, rules: str) -> Demographics:
    return Demographics(rules_for(language, rules))
