"""What the HTTP API serves from: methods built on demand (once per name and parameters), the evidence of
each answer given (so its client can resolve an evidence id later), interactive consultations over the
disease knowledge, and interactive differential sessions over DDXPlus — all of it bounded in memory."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from clinrag.consult.state import ConsultState
from clinrag.consult.understand.finding_types import FindingStatus
from clinrag.core.buildcache import BuildCache, BuildPool
from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Case, Evidence, Language
from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder
from clinrag.llm.base import ChatModel
from clinrag.methods.base import SHARED_PARTS, Method, MethodContext
from clinrag.methods.consult import ConsultMethod
from clinrag.methods.meddx.interactive import DdxSession, InteractiveDdx
from clinrag.methods.meddx.interviewee import QuestionMatcher
from clinrag.methods.resources import ResourcePolicy
from clinrag.patients.base import PatientBase
from clinrag.patients.record import PatientRecord

V = TypeVar("V")


class BoundedStore(Generic[V]):
    """What the server keeps for its clients, bounded three ways: at most `capacity` entries, at most
    `max_bytes` as `size` measures them, and none left unused for longer than `ttl_s`. The least recently
    used go first. Thread-safe."""

    def __init__(
        self,
        capacity: int,
        max_bytes: int,
        ttl_s: float,
        size: Callable[[V], int],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity, self.max_bytes, self.ttl_s = capacity, max_bytes, ttl_s
        self._size, self._clock = size, clock
        self._items: OrderedDict[str, tuple[V, int, float]] = OrderedDict()  # value, bytes, last used
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, key: str, value: V) -> None:
        """Keep `value` (again: a value that grew is measured anew). One larger than the whole budget is
        refused, since keeping it would mean forgetting everyone else's."""
        size = self._size(value)
        if size > self.max_bytes:
            raise InvalidInputError(
                f"too much to keep for one client ({size} bytes, at most {self.max_bytes})"
            )
        with self._lock:
            self._drop(key)
            self._items[key] = (value, size, self._clock())
            self._bytes += size
            self._expire()
            while len(self._items) > self.capacity or self._bytes > self.max_bytes:
                self._drop(next(iter(self._items)))

    def get(self, key: str) -> V | None:
        with self._lock:
            self._expire()
            item = self._items.get(key)
            if item is None:
                return None
            value, size, _ = item
            self._items[key] = (value, size, self._clock())
            self._items.move_to_end(key)
            return value

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def _expire(self) -> None:
        oldest = self._clock() - self.ttl_s
        while self._items and next(iter(self._items.values()))[2] < oldest:
            self._drop(next(iter(self._items)))

    def _drop(self, key: str) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self._bytes -= item[1]


def evidence_bytes(items: Iterable[Evidence]) -> int:
    """What evidence holds, roughly: its texts and ids (the patients' words among them)."""
    return sum(len(item.id) + len(item.text) + len(item.source) + 200 for item in items)


# a server's patient base, its records and their labels
ServedPatients = tuple[PatientBase | None, Sequence[PatientRecord], dict[str, list[str]]]


class ConsultService:
    """Answers cases with any registered method. A method is built once per name and validated parameters
    (the `method_capacity` most recently used kept); builds run `build_workers` at a time (`build_waiting`
    more queued, beyond that 503), one per key, so a slow build holds up only the requests that need it.
    Methods share their heavy parts (a loaded knowledge base, the consultation's disease model) through one
    cache. A request's parameters may name only the files and graphs the settings allow (`api_data_roots`,
    `api_graph_uris`). The evidence of each answer is kept under the answer's id, for its client. A patient
    base given as a function is opened when a method that draws on patients (`MethodSpec.uses_patients`) is
    first built: a server answering consultations alone never opens (or embeds) one."""

    def __init__(
        self,
        settings: Settings,
        *,
        patient_base: PatientBase | Callable[[], PatientBase] | None = None,
        embedder: Callable[[Settings], Embedder] | None = None,
        chat_model: Callable[[Settings], ChatModel] | None = None,
        method_capacity: int = 8,
        shared_capacity: int = SHARED_PARTS,
        build_workers: int = 2,
        build_waiting: int = 16,
    ) -> None:
        self.settings = settings
        self._patient_base = patient_base
        self._patients_lock = threading.Lock()
        self._served: ServedPatients | None = None
        self.resources = ResourcePolicy(settings.api_data_roots, settings.api_graph_uris)
        self._embedder = embedder
        self._chat_model = chat_model
        self._methods: BuildCache[Method] = BuildCache(method_capacity)
        self._shared: BuildCache[Any] = BuildCache(shared_capacity)
        self._builds = BuildPool(build_workers, build_waiting)
        self.answers: BoundedStore[dict[str, Evidence]] = BoundedStore(
            settings.api_answers,
            settings.api_store_max_bytes,
            settings.api_session_ttl_s,
            size=lambda items: evidence_bytes(items.values()),
        )

    def method_future(self, name: str, params: dict[str, Any]) -> Future[Method]:
        """The method as a future (done at once when it is built); invalid parameters, or a file or graph
        the server does not allow, raise here, before anything is built."""
        from clinrag.methods.registry import get_method

        spec = get_method(name)  # an unknown name is an InvalidInputError listing the valid ones
        config = spec.config.from_params(params)
        self.resources.check(config)
        base, records, labels = self._patients() if spec.uses_patients else (None, (), {})
        context = MethodContext(
            settings=self.settings,
            params=dict(params),
            experience=records,
            labels=labels,
            patient_base=base,
            embedder_factory=self._embedder,
            chat_model_factory=self._chat_model,
            shared=self._shared,
        )
        key = (name, config.model_dump_json())  # the same configuration however it was spelled
        return self._methods.future(key, lambda: spec.build(context), self._builds.submit)

    def _patients(self) -> ServedPatients:
        """The server's patient base (opened on first use when it was given as a function), its records and
        their labels: the same objects for every method, which share what they build from them."""
        with self._patients_lock:
            if self._served is None:
                base = self._patient_base() if callable(self._patient_base) else self._patient_base
                records = list(base.records.values()) if base is not None else []
                self._served = (base, records, record_labels(records))
            return self._served

    def method(self, name: str, params: dict[str, Any]) -> Method:
        return self.method_future(name, params).result()

    async def amethod(self, name: str, params: dict[str, Any]) -> Method:
        # shielded: a request that times out stops waiting, the build goes on for whoever asks next
        return await asyncio.shield(asyncio.wrap_future(self.method_future(name, params)))

    async def answer(self, case: Case, name: str, params: dict[str, Any]) -> Answer:
        method = await self.amethod(name, params)
        answer = await method.aanswer(case)
        self.answers.put(answer.case_id, {item.id: item for item in answer.evidence})
        return answer


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
    """One patient's consultation: the parameters of the method that answers it (the method itself is
    looked up each time, so a session does not keep one alive), the case it started from, what is known of
    the patient so far and the evidence of the last answer given (what the session's client may resolve)."""

    params: dict[str, Any]
    case: Case
    state: ConsultState
    evidence: dict[str, Evidence] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one change or view of it at a time

    def size(self) -> int:
        return (
            len(self.case.question) + 100 * len(self.state.answered) + evidence_bytes(self.evidence.values())
        )


class ConsultSessions:
    """Interactive consultations (`consult` over the disease knowledge), kept in memory within the
    settings' bounds (`api_sessions`, `api_store_max_bytes`, `api_session_ttl_s`). Each answer to a question
    extends the session's state, up to `max_answers`."""

    def __init__(self, consult: ConsultService, max_answers: int = 200) -> None:
        self.consult = consult
        self.max_answers = max_answers
        settings = consult.settings
        self.sessions: BoundedStore[ConsultSession] = BoundedStore(
            settings.api_sessions,
            settings.api_store_max_bytes,
            settings.api_session_ttl_s,
            size=ConsultSession.size,
        )

    async def start(
        self, text: str, language: Language, params: dict[str, Any]
    ) -> tuple[str, ConsultSession]:
        method = await self._method(params)
        session_id = uuid.uuid4().hex
        case = Case(id=f"session-{session_id[:12]}", language=language, question=text)
        _, state = await asyncio.to_thread(method.start, case)
        session = ConsultSession(dict(params), case, state)
        self.sessions.put(session_id, session)
        return session_id, session

    def get(self, session_id: str) -> ConsultSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise KeyError(session_id)
        return session

    async def answer(self, session_id: str, session: ConsultSession, concept: str, answer: str) -> None:
        """Record the patient's yes / no / don't know about a finding (a concept id of the knowledge)."""
        consultant = (await self._method(session.params)).consultant_for(session.case.language)
        if concept not in consultant.concepts:
            raise InvalidInputError(f"unknown concept {concept!r}: answer a question's concept id")
        if answer not in ANSWER_STATUS:
            raise InvalidInputError(f"unknown answer {answer!r}: expected yes, no or unknown")
        async with session.lock:
            if len(session.state.answered) >= self.max_answers:
                raise InvalidInputError(f"a consultation takes at most {self.max_answers} answers")
            consultant.answer(session.state, concept, ANSWER_STATUS[answer])
        self.sessions.put(session_id, session)

    async def view(self, session_id: str, session: ConsultSession) -> Answer:
        """The session's answer as it stands; its evidence is what the session's client may resolve."""
        method = await self._method(session.params)
        async with session.lock:
            answer = await method.aanswer_state(session.case, session.state)
            session.evidence = {item.id: item for item in answer.evidence}
        self.sessions.put(session_id, session)
        return answer

    async def _method(self, params: dict[str, Any]) -> ConsultMethod:
        """The `consult` method for a session's parameters (looked up, or built again if it was dropped)."""
        method = await self.consult.amethod("consult", params)
        if not isinstance(method, ConsultMethod):
            raise InvalidInputError("the registered 'consult' method does not support sessions")
        return method


class DdxService:
    """Interactive differential sessions over a DDXPlus patient base, kept in memory within `capacity`,
    `max_bytes` (a session holds a weight per past patient) and `ttl_s` of disuse. A complaint in words is
    matched to the closest starting symptom."""

    def __init__(
        self,
        interactive: InteractiveDdx,
        matcher: QuestionMatcher,
        capacity: int = 1_000,
        max_bytes: int = 64_000_000,
        ttl_s: float = 3_600.0,
    ) -> None:
        self.interactive = interactive
        self.matcher = matcher
        self.sessions: BoundedStore[DdxSession] = BoundedStore(capacity, max_bytes, ttl_s, size=_ddx_bytes)
        self._complaints = set(interactive.complaints())

    @classmethod
    def from_ddxplus(cls, folder: Path, embedder: Embedder, settings: Settings | None = None) -> DdxService:
        from clinrag.eval.datasets import load_dataset
        from clinrag.methods.meddx.experience import ExperienceConfig, experience_model
        from clinrag.methods.meddx.structured_patient import evidence_catalogue

        dataset = load_dataset("ddxplus-interactive", folder)
        catalogue = evidence_catalogue(dataset.cases[0].meta["evidence_catalogue"])
        config = ExperienceConfig()
        model = experience_model(dataset.records, dataset.labels, config)
        interactive = InteractiveDdx(model, catalogue, config)
        matcher = QuestionMatcher(catalogue, embedder, names=interactive.complaints())
        if settings is None:
            return cls(interactive, matcher)
        bounds = (settings.api_sessions, settings.api_store_max_bytes, settings.api_session_ttl_s)
        return cls(interactive, matcher, *bounds)

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

    def answer(self, session_id: str, session: DdxSession, answer: str, values: list[str]) -> None:
        self.interactive.answer(session, answer, values)
        self.sessions.put(session_id, session)  # measured again: the dialogue grew

    def get(self, session_id: str) -> DdxSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise KeyError(session_id)
        return session


def _ddx_bytes(session: DdxSession) -> int:
    return session.weights.nbytes + sum(len(e.question) + len(e.answer) + 100 for e in session.dialogue)
