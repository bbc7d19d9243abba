"""Findings understood from a patient's own words: concepts of a `Vocabulary` with a status (present, absent,
uncertain), the patient's age, sex, the duration and onset of the complaint, and what could not be mapped.

The words are read by a spaCy pipeline (`pipeline`) whose rules are data files of the input's language
(`rules`, `resources/<language>/`): concept mentions by a `SpanRuler` over every surface form and lay phrase
(longest match wins), lay constructions ("pain on the right side of my chest when I breathe" → pleuritic chest
pain), NegEx scopes from ConText rules for denied, hedged and someone else's findings ("my wife has a fever"),
and, given an embedder, the meaning of a clause no phrase matched (`meaning`). A finding the text both states
and denies is uncertain, and quotes the sentences that do."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from spacy.language import Language
from spacy.tokens import Doc, Span

from clinrag.consult.understand.crises import crises_in
from clinrag.consult.understand.demographics import first_sentence
from clinrag.consult.understand.finding_types import Contradiction, Finding, Findings, FindingStatus
from clinrag.consult.understand.meaning import NEGATION_MARGIN, SEMANTIC_THRESHOLD, Meant
from clinrag.consult.understand.pipeline import build_pipeline
from clinrag.consult.understand.rules import LanguageRules, load_rules
from clinrag.consult.understand.vocabulary import Concept, Vocabulary, reachable
from clinrag.core.errors import InvalidInputError
from clinrag.embed.base import Embedder

MAX_TEXT_CHARS = 20_000


class FindingExtractor:
    """Findings of one text against one vocabulary in one language. Building the pipeline takes seconds (the
    ruler holds every surface form): build once, or load a saved one (`nlp`)."""

    def __init__(
        self,
        vocabulary: Vocabulary,
        embedder: Embedder | None = None,
        *,
        lay_names: Iterable[str] | None = None,
        language: str = "en",
        threshold: float = SEMANTIC_THRESHOLD,
        negation_margin: float = NEGATION_MARGIN,
        nlp: Language | None = None,
    ) -> None:
        """`embedder` turns the matching by meaning on, against the concepts of `lay_names` (the names
        patients use, such as a disease table's symptoms; default: every concept of a lay source). `nlp`: the
        pipeline built for this vocabulary and language before (its meaning vectors included)."""
        self.vocabulary = vocabulary
        self.language = language
        self.rules: LanguageRules = load_rules(language)
        self.nlp = nlp if nlp is not None else build_pipeline(vocabulary, self.rules)
        if embedder is not None and nlp is None:
            self.nlp.get_pipe("meaning").fit(vocabulary, embedder, lay_names)
        # how the meaning pipe reads each text (`MeaningPipe.__call__`); the loaded pipeline is not changed
        self.embedder = embedder
        self.threshold = threshold
        self.negation_margin = negation_margin
        self._concepts = {concept.id: concept for concept in vocabulary.concepts}
        self._parents = vocabulary.parents

    def extract(self, text: str) -> Findings:
        if not text or not text.strip():
            raise InvalidInputError("the text is empty: describe the complaint in a few words")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidInputError(
                f"the text has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} can be read at once"
            )
        reading = {"embedder": self.embedder, "threshold": self.threshold, "margin": self.negation_margin}
        doc = self.nlp(text, component_cfg={"meaning": reading})
        theirs = _the_patients(doc)
        findings = [
            _finding(self._concepts[span.id_], span.text, span.start_char, span.end_char, self._status(span))
            for span in doc.ents
            if theirs(span._.other, span.start_char)
        ]
        found = {finding.concept_id for finding in findings}
        meant = [self._meant(m) for m in doc._.meant if m.concept not in found and theirs(m.other, m.start)]
        findings = sorted(findings + meant, key=lambda finding: finding.start)
        covered = [(f.start, f.end) for f in findings] + [(s.start_char, s.end_char) for s in doc.ents]
        findings = self._contradicted(findings, doc)
        # one finding said twice the same way ("fluttering and thumping") is listed once
        unique = {(finding.concept_id, finding.status): finding for finding in reversed(findings)}
        return Findings(
            findings=sorted(unique.values(), key=lambda finding: finding.start),
            age=doc._.age,
            sex=doc._.sex,
            duration=doc._.duration,
            onset=doc._.onset,
            subject=doc._.subject,
            self_told=bool(doc._.self_told),
            crises=crises_in(text, self.rules),
            not_understood=self._not_understood(text, covered),
        )

    def _status(self, span: Span) -> FindingStatus:
        """A mention's status; what the rest of its clause says after it may deny it ("my eyesight is
        normal", "the runny nose went away": read within the clause only, as NegEx's following cues reach
        back over the whole sentence)."""
        if span._.hedged:
            return "uncertain"
        split = self.rules.pattern("clause_split")
        after = split.split(span.doc.text[span.end_char :], maxsplit=1)[0]
        denied = span._.negex or span._.reading == "absent" or self.rules.pattern("resolved").search(after)
        if span._.negex:  # denied only for the moment ("I don't have the pain right now"): it comes and goes
            before = split.split(span.doc.text[span.sent.start_char : span.start_char])[-1]
            if self.rules.pattern("momentary").search(before + span.text + after):
                return "uncertain"
        return "absent" if denied else "present"

    def _meant(self, meant: Meant) -> Finding:
        return _finding(self._concepts[meant.concept], meant.text, meant.start, meant.end, meant.status)

    def _contradicted(self, findings: list[Finding], doc: Doc) -> list[Finding]:
        """`findings` (in text order) with each finding the text both states and denies made one uncertain
        finding that quotes both: the text cannot tell which is true, and no statement wins by coming last. A
        denial of a broader finding denies its kinds too ("I have a mild fever. I do not have a fever.": both
        are uncertain); a denial of a narrower one does not ("a fever but no mild fever"), nor one of what was
        not said ("I have chest pain. No other pain.")."""
        excluding = {span.start_char for span in doc.ents if span._.excluding}
        denials = [f for f in findings if f.status == "absent" and f.start not in excluding]
        conflicts: dict[str, tuple[list[Finding], list[Finding]]] = {}
        for stated in (f for f in findings if f.status == "present"):
            broader = set(reachable(stated.concept_id, self._parents))  # it and what it is a kind of
            for denied in (f for f in denials if f.concept_id in broader):
                for concept in (stated.concept_id, denied.concept_id):
                    yes, no = conflicts.setdefault(concept, ([], []))
                    yes.append(stated)
                    no.append(denied)
        settled: list[Finding] = []
        for finding in findings:
            said = conflicts.get(finding.concept_id)
            if said is None:
                settled.append(finding)
            elif all(f.concept_id != finding.concept_id for f in settled):  # the first mention stands for all
                contradiction = Contradiction(
                    stated=_sentences(doc, said[0]), denied=_sentences(doc, said[1])
                )
                settled.append(
                    finding.model_copy(update={"status": "uncertain", "contradiction": contradiction})
                )
        return settled

    def _not_understood(self, text: str, covered: list[tuple[int, int]]) -> list[str]:
        """Clauses that read like a complaint but contain no finding (`covered`: the findings' offsets)."""
        pattern = self.rules.pattern
        phrases: list[str] = []
        position = 0
        for piece in pattern("clause_split").split(text):
            start = text.find(piece, position) if piece else position
            position = start + len(piece)
            if not piece.strip() or any(s < position and e > start for s, e in covered):
                continue
            if not pattern("complaint_cue").search(piece):
                continue
            phrase = pattern("filler").sub("", piece.strip()).strip()
            if (
                len(phrase) > 2
                and not pattern("not_complaint").search(phrase.lower())
                and not pattern("negative_only").match(phrase)
            ):
                phrases.append(phrase)
        return list(dict.fromkeys(phrases))


def _sentences(doc: Doc, findings: list[Finding]) -> list[str]:
    """The sentences the findings are said in, as written, each once."""
    said = (next(s for s in doc.sents if s.start_char <= f.start < s.end_char) for f in findings)
    return list(dict.fromkeys(sentence.text.strip().rstrip(". ") for sentence in said))


def _finding(concept: Concept, text: str, start: int, end: int, status: FindingStatus) -> Finding:
    return Finding(
        concept_id=concept.id,
        concept=concept.name,
        ids=list(concept.ids),
        status=status,
        text=text,
        start=start,
        end=end,
    )


def _the_patients(doc: Doc) -> Callable[[bool, int], bool]:
    """Whether a mention at a character offset, said of someone else or not (a ConText FAMILY cue: "my son
    had the same"), is the patient's. An account about someone the writer describes ("My son has a fever")
    names them in its first sentence, so there that cue names the patient."""
    first = first_sentence(doc)
    about_them = doc._.subject is not None
    return lambda other, start: not other or (about_them and start < first.end_char)
