"""A finding's name in the words a patient or a sentence uses: the lay name a plain symptom list gives it,
the name a question asks it by, a knowledge's label in plain words."""

from __future__ import annotations

from collections.abc import Mapping

from clinrag.consult.understand.vocabulary import Concept, Vocabulary
from clinrag.graph.importers.ddxplus_findings import is_question


def asked_name(concept: Concept) -> str:
    """The finding as a question names it for a patient: the disease table's lay name, else the name its
    source gives laypeople (HPO's "Sore throat" for Pharyngalgia), else its display name."""
    lay = concept.plain or concept.layperson
    return plain(lay) if lay else display_name(concept)


def display_name(concept: Concept) -> str:
    """The finding in plain words: the name a plain symptom list gives it (the disease table's lay name) when
    it has one, else its first phrase when it is named by a question (DDXPlus), else its name."""
    lay = concept.plain
    if lay is None and concept.name == concept.question and concept.synonyms:
        lay = concept.synonyms[0]
    return plain(lay or concept.name)


def plain(name: str) -> str:
    """A name as it reads inside a sentence: lower case, acronyms kept ("Shortness of Breath" → "shortness of
    breath", "COPD" stays)."""
    return " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in name.split())


def symptom_name(vocabulary: Vocabulary, symptom: str) -> str:
    """A symptom of the knowledge in plain words (one named by a question: its finding's name)."""
    concept = vocabulary.known(symptom) if is_question(symptom) else None
    return display_name(concept) if concept is not None else plain(symptom)


def patient_words(vocabulary: Vocabulary, label: str) -> str:
    """A finding named by the knowledge (an HPO label) in the words a patient uses, where it has them."""
    concept = vocabulary.first_known((label,))
    return asked_name(concept) if concept is not None else label.lower()


def names_in_language(concepts: Mapping[str, Concept], vocabulary: Vocabulary) -> dict[str, str]:
    """The findings' names as a report gives them (`display_name`, in the knowledge's language) → their names
    in the language `vocabulary` reads (its preferred name), for every concept it names."""
    return {display_name(concepts[c.id]): plain(c.name) for c in vocabulary.concepts if c.id in concepts}
