"""What the HTTP API serves from: methods built on demand (once per name and parameters), the evidence of
the answers given (so a client can resolve an evidence id later), interactive consultations over the disease
knowledge, and interactive differential sessions over DDXPlus."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Case, Evidence, Language
from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder
from clinrag.llm.base import ChatModel
from clinrag.methods.base import Method, MethodContext
from clinrag.methods.consult.consultant import ConsultState
from clinrag.methods.consult.findings import FindingStatus
from clinrag.methods.consult.method import ConsultMethod
from clinrag.methods.meddx.interactive import DdxSession, InteractiveDdx
from clinrag.methods.meddx.interviewee import QuestionMatcher
from clinrag.patients.base import PatientBase
from clinrag.patients.record import PatientRecord

V = TypeVar("V")


class LruStore(Generic[V]):
    """A thread-safe mapping that forgets its least recently used entries beyond `capacity`."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: str, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def get(self, key: str) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value


class ConsultService:
    """Answers cases with any registered method; a method is built once per (name, parameters) and the
    `method_capacity` most recently used are kept (each distinct parameters value builds one)."""

    def __init__(
        self,
        settings: Settings,
        *,
        patient_base: PatientBase | None = None,
        embedder: Callable[[Settings], Embedder] | None = None,
        chat_model: Callable[[Settings], ChatModel] | None = None,
        evidence_capacity: int = 50_000,
        method_capacity: int = 8,
    ) -> None:
        self.settings = settings
        self.patient_base = patient_base
        self._embedder = embedder
        self._chat_model = chat_model
        self._methods: LruStore[Method] = LruStore(method_capacity)
        self._lock = threading.Lock()
        self.evidence: LruStore[Evidence] = LruStore(evidence_capacity)

    def method(self, name: str, params: dict[str, Any]) -> Method:
        from clinrag.methods.registry import get_method

        spec = get_method(name)  # an unknown name is an InvalidInputError listing the valid ones
        key = f"{name}:{json.dumps(params, sort_keys=True, default=str)}"
        with self._lock:  # one build at a time: a second request for the same method waits for the first
            method = self._methods.get(key)
            if method is None:
                records = list(self.patient_base.records.values()) if self.patient_base else []
                context = MethodContext(
                    settings=self.settings,
                    params=dict(params),
                    experience=records,
                    labels=record_labels(records),
                    patient_base=self.patient_base,
                    embedder_factory=self._embedder,
                    chat_model_factory=self._chat_model,
                )
                method = spec.build(context)
                self._methods.put(key, method)
            return method

    async def answer(self, case: Case, name: str, params: dict[str, Any]) -> Answer:
        method = await asyncio.to_thread(self.method, name, params)
        answer = await method.aanswer(case)
        self.remember(answer)
        return answer

    def remember(self, answer: Answer) -> None:
        for item in answer.evidence:
            self.evidence.put(item.id, item)


def record_labels(records: list[PatientRecord]) -> dict[str, list[str]]:
    """Each past patient's diagnoses (the labels `knn-vote` votes with): its coded diagnoses, else the
    diagnosis of its structured data; a record with neither has no labels."""
    labels: dict[str, list[str]] = {}
    for record in records:
        coded = record.codes.get("diagnosis")
        named = record.structured.get("diagnosis")
        found = list(coded) if coded else [named] if isinstance(named, str) and named.strip() else []
        if found:
            labels[record.id] = found
    return labels


ANSWER_STATUS: dict[str, FindingStatus] = {
    "yes": "present",
    "no": "absent",
    "unknown": "uncertain",
}


@dataclass
class ConsultSession:
    """One patient's consultation: the method that answers it (built for the session's parameters), the case
    it started from and what is known of the patient so far."""

    method: ConsultMethod
    case: Case
    state: ConsultState
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self) -> Answer:
        with self.lock:
            return self.method.answer_state(self.case, self.state)


class ConsultSessions:
    """Interactive consultations (`consult` over the disease knowledge), kept in memory, the least recently
    used forgotten beyond `capacity`. Each answer to a question extends the session's state."""

    def __init__(self, consult: ConsultService, capacity: int = 1_000) -> None:
        self.consult = consult
        self.sessions: LruStore[ConsultSession] = LruStore(capacity)

    def start(self, text: str, language: Language, params: dict[str, Any]) -> tuple[str, ConsultSession]:
        method = self.consult.method("consult", params)
        if not isinstance(method, ConsultMethod):
            raise InvalidInputError("the registered 'consult' method does not support sessions")
        session_id = uuid.uuid4().hex
        case = Case(id=f"session-{session_id[:12]}", language=language, question=text)
        session = ConsultSession(method, case, method.consultant.start(text))
        self.sessions.put(session_id, session)
        return session_id, session

    def get(self, session_id: str) -> ConsultSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise KeyError(session_id)
        return session

    def answer(self, session: ConsultSession, concept: str, answer: str) -> None:
        """Record the patient's yes / no / don't know about a finding (a concept id of the knowledge)."""
        consultant = session.method.consultant
        if concept not in consultant.concepts:
            raise InvalidInputError(f"unknown concept {concept!r}: answer a question's concept id")
        if answer not in ANSWER_STATUS:
            raise InvalidInputError(f"unknown answer {answer!r}: expected yes, no or unknown")
        with session.lock:
            consultant.answer(session.state, concept, ANSWER_STATUS[answer])


class DdxService:
    """Interactive differential sessions over a DDXPlus patient base (kept in memory, least recently used
    forgotten beyond `capacity`). A complaint in words is matched to the closest starting symptom."""

    def __init__(self, interactive: InteractiveDdx, matcher: QuestionMatcher, capacity: int = 1_000) -> None:
        self.interactive = interactive
        self.matcher = matcher
        self.sessions: LruStore[DdxSession] = LruStore(capacity)
        self._complaints = set(interactive.complaints())

    @classmethod
    def from_ddxplus(cls, folder: Path, embedder: Embedder) -> DdxService:
        from clinrag.eval.datasets import load_dataset
        from clinrag.methods.meddx.experience import ExperienceConfig, experience_model
        from clinrag.methods.meddx.structured_patient import evidence_catalogue

        dataset = load_dataset("ddxplus-interactive", folder)
        catalogue = evidence_catalogue(dataset.cases[0].meta["evidence_catalogue"])
        config = ExperienceConfig()
        model = experience_model(dataset.records, dataset.labels, config)
        interactive = InteractiveDdx(model, catalogue, config)
        return cls(interactive, QuestionMatcher(catalogue, embedder, names=interactive.complaints()))

    def start(self, sex: str | None, complaint: str) -> tuple[str, DdxSession]:
        code = complaint.strip()
        if code not in self._complaints:
            matched, score = self.matcher.match(code)
            if matched is None:
                raise InvalidInputError(
                    f"no symptom matches the complaint {complaint!r} (best similarity {score:.2f}): name one "
                    "symptom, e.g. 'I have a cough'"
                )
            code = matched
        session = self.interactive.start(sex, code)
        session_id = uuid.uuid4().hex
        self.sessions.put(session_id, session)
        return session_id, session

    def get(self, session_id: str) -> DdxSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise KeyError(session_id)
        return session
