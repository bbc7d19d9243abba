"""The consultation's prose layer (`prose=llm`): a model writes the sentences, Med-TextGrad refines them, and
the evidence check keeps only what the evidence supports; the structured parts never change.

The packaged model is too small to write given sentences on demand, so a scripted OpenAI-compatible server on
loopback (tests/openai_server.py) stands in for a capable model server and serves recorded replies — a
faithful answer, one with an invented dose, one citing evidence that does not exist, one that is not JSON —
over real HTTP through the real client. The consultation runs for real on the packaged disease table, the
check with the real MiniLM embedder, and Med-TextGrad's staged calls for real against a server that answers
each of its roles."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from clinrag.consult.answer.compose import render
from clinrag.consult.answer.report import Sentence
from clinrag.consult.consultant import Consultant
from clinrag.core.models import Answer, Case
from clinrag.core.settings import Settings
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, ConsultMethod, build_consultant
from clinrag.methods.consult_prose import Names, ProseWriter
from tests.app.test_cli import invoke_cli
from tests.consult.test_consult import README_EXAMPLE
from tests.openai_server import SCRIPTED_SETTINGS, LoopbackServer, ScriptedServer, chat_body, scripted_model

KNOWLEDGE = "packaged:conditions"  # clinrag's knowledge base alone: the model builds in seconds
FINDINGS = ["finding:hpo:HP:0001945", "finding:hpo:HP:0031245", "finding:hpo:HP:0033771"]
NOT_JSON = "You most likely have pneumonia. Rest, drink fluids and take antibiotics."
STRUCTURE = {"sentences", "prose", "dropped"}  # what the prose layer may change; the rest is the structure


def reply(*sentences: dict) -> str:
    return json.dumps({"sentences": list(sentences)})


@pytest.fixture(scope="module")
def replies(template: Answer) -> dict[str, dict]:
    """The recorded replies, written for this consultation's own evidence: a faithful answer (the findings,
    the leading diagnoses, the questions and a care step, each citing what the template cites), one with an
    invented dose, one naming a drug no evidence names, one citing a fact that does not exist."""
    sentences = {s["kind"]: s for s in template.details["sentences"]}
    leading = [d["name"] for d in template.details["differential"][:3]]
    care = next(s for s in template.details["next_steps"] if s["kind"] == "care")
    step = {"text": f"Care used for {care['diagnosis']}: {care['name']}.", "evidence": [care["evidence"]]}
    return {
        "finding": {
            "text": "For 3 days you have had a fever, a productive cough and chest pain when you breathe.",
            "evidence": FINDINGS,
            "kind": "finding",
        },
        "differential": {
            "text": f"These findings fit best with {leading[0]}, then {leading[1]} or {leading[2]}.",
            "evidence": sentences["differential"]["evidence"],
            "kind": "differential",
        },
        "question": {
            "text": sentences["question"]["text"],
            "evidence": sentences["question"]["evidence"],
            "kind": "question",
        },
        "step": {**step, "kind": "step"},
        "dose": {
            "text": "Take 500 mg amoxicillin three times a day.",
            "evidence": step["evidence"],
            "kind": "step",
        },
        "other_drug": {
            "text": "This is treated with isoniazid.",
            "evidence": step["evidence"],
            "kind": "step",
        },
        "invented": {
            "text": f"Penicillin is used for {leading[0]}.",
            "evidence": [f"graph:{leading[0]}|RECOMMEND_DRUG|Penicillin"],
            "kind": "step",
        },
    }


def faithful(replies: dict[str, dict]) -> list[dict]:
    return [replies[kind] for kind in ("finding", "differential", "question", "step")]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("prose-home")


@pytest.fixture(scope="module")
def context(home: Path) -> MethodContext:
    return MethodContext(settings=Settings(home=home))


@pytest.fixture(scope="module")
def consultant(context: MethodContext) -> Consultant:
    return build_consultant(context, ConsultConfig(sources=KNOWLEDGE))


@pytest.fixture(scope="module")
def template(consultant: Consultant) -> Answer:
    return ConsultMethod(consultant).answer(Case(id="c", question=README_EXAMPLE))


def consult(consultant: Consultant, context: MethodContext, server: LoopbackServer, **options) -> Answer:
    model = scripted_model(server, model="served-model", concurrency=4)
    names = Names.of(consultant.differential.model.diseases)
    writer = ProseWriter(model, context.embedder, names, **({"refine_iterations": 0} | options))
    return ConsultMethod(consultant, writer).answer(Case(id="c", question=README_EXAMPLE))


def scripted(server: ScriptedServer, text: str) -> None:
    server.replies = [(200, chat_body(text), 0.0)]


def step(answer: Answer, name: str):
    return next(s for s in answer.trace.steps if s.name == name)


def structure(answer: Answer) -> str:
    details = {k: v for k, v in answer.details.items() if k not in STRUCTURE}
    return json.dumps(
        [details, answer.result.model_dump(), [e.model_dump() for e in answer.evidence]], sort_keys=True
    )


def test_a_faithful_reply_is_kept_with_its_citations(consultant, context, template, server, replies) -> None:
    FAITHFUL = faithful(replies)
    scripted(server, reply(*FAITHFUL))
    answer = consult(consultant, context, server)
    details = answer.details
    assert details["prose"] == "llm" and details["dropped"] == []
    written = [s for s in details["sentences"] if s["by"] == "llm"]
    assert [(s["text"], s["evidence"], s["kind"]) for s in written] == [
        (s["text"], s["evidence"], s["kind"]) for s in FAITHFUL
    ]
    assert all(s["unsupported"] == [] for s in written)
    # Where to go and how soon stays the templates' and comes first; so do the sentences resting on no
    # evidence: the note on patients and the advice, last.
    kept = [s["kind"] for s in details["sentences"] if s["by"] == "template"]
    triage = [kind for kind in kept if kind in ("urgency", "safety_net")]
    assert kept == [*triage, "experience", "advice"] and triage[0] == "urgency"
    assert [s["by"] for s in details["sentences"]][: len(triage)] == ["template"] * len(triage)
    assert FAITHFUL[0]["text"] + " [finding:hpo:HP:0001945, " in answer.text
    assert "see a doctor" in answer.text and answer.text != template.text
    request = server.requests[0]
    assert request["response_format"]["type"] == "json_schema"  # schema-constrained
    prompt = request["messages"][-1]["content"]
    leading = template.details["differential"][0]
    assert re.search(rf"{re.escape(leading['name'])}: \d+%", prompt)
    assert f"[{replies['step']['evidence'][0]}] " in prompt
    assert answer.usage.calls == 1 and step(answer, "consult.prose.check").output["kept"] == 4


def test_an_invented_dose_is_dropped_even_when_flagging(consultant, context, server, replies) -> None:
    FAITHFUL, DOSE, OTHER_DRUG = faithful(replies), replies["dose"], replies["other_drug"]
    scripted(server, reply(*FAITHFUL, DOSE, OTHER_DRUG))
    dropped = consult(consultant, context, server)
    assert [s["text"] for s in dropped.details["dropped"]] == [DOSE["text"], OTHER_DRUG["text"]]
    dose, other = dropped.details["dropped"]
    assert any("dose" in reason and "500 mg" in reason for reason in dose["unsupported"])
    # a drug no evidence names is not supported by the care step it cites
    assert other["unsupported"]
    assert "500" not in dropped.text and "isoniazid" not in dropped.text
    assert len([s for s in dropped.details["sentences"] if s["by"] == "llm"]) == len(FAITHFUL)

    flagged = consult(consultant, context, server, unsupported="flag")
    assert [s["text"] for s in flagged.details["dropped"]] == [DOSE["text"]]
    kept = {s["text"]: s for s in flagged.details["sentences"]}
    assert kept[OTHER_DRUG["text"]]["unsupported"] == other["unsupported"]
    assert step(flagged, "consult.prose.check").output["flagged"] == 1


def test_citations_must_exist(consultant, context, server, replies) -> None:
    FAITHFUL, INVENTED_ID = faithful(replies), replies["invented"]
    half = {**FAITHFUL[3], "evidence": [*FAITHFUL[3]["evidence"], INVENTED_ID["evidence"][0]]}
    uncited = {**FAITHFUL[1], "evidence": []}
    scripted(server, reply(FAITHFUL[0], INVENTED_ID, half, uncited))
    answer = consult(consultant, context, server, unsupported="flag")
    reasons = {s["text"]: s["unsupported"] for s in answer.details["dropped"]}
    assert list(reasons) == [INVENTED_ID["text"], half["text"], uncited["text"]]
    assert "not evidence of this consultation" in reasons[INVENTED_ID["text"]][0]
    assert "Penicillin" in reasons[half["text"]][0] and reasons[uncited["text"]] == ["cites no evidence"]
    known = set(answer.evidence_ids)
    assert all(set(s["evidence"]) <= known for s in answer.details["sentences"])


def test_invalid_json_falls_back_to_the_templates(consultant, context, template, server) -> None:
    scripted(server, NOT_JSON)
    answer = consult(consultant, context, server)
    assert answer.details["prose"] == "template" and answer.text == template.text
    assert answer.details["sentences"] == template.details["sentences"]
    assert step(answer, "consult.prose.draft").error_type == "StructuredOutputError"
    assert "StructuredOutputError" in step(answer, "consult.prose.fallback").output["reason"]
    assert answer.error is None and answer.usage.calls == 1


def test_when_every_sentence_is_dropped_the_templates_stand(
    consultant, context, template, server, replies
) -> None:
    scripted(server, reply(replies["dose"], replies["other_drug"], replies["invented"]))
    answer = consult(consultant, context, server)
    assert answer.details["prose"] == "template" and answer.text == template.text
    assert len(answer.details["dropped"]) == 3


@pytest.mark.parametrize("kind", ["faithful", "dose", "not-json", "invented-id"])
def test_the_structured_parts_never_change(consultant, context, template, server, replies, kind: str) -> None:
    texts = {
        "faithful": reply(*faithful(replies)),
        "dose": reply(*faithful(replies), replies["dose"]),
        "not-json": NOT_JSON,
        "invented-id": reply(replies["invented"]),
    }
    scripted(server, texts[kind])
    assert structure(consult(consultant, context, server)) == structure(template)


class RoleServer(LoopbackServer):
    """Answers the prose layer's draft, Med-TextGrad's generator (which rewrites the draft), its critics
    (no issue), and its gradients and prompt update, each by its prompt."""

    def __init__(self, draft: str, revised: str) -> None:
        self.draft, self.revised = draft, revised
        self.roles: list[str] = []
        self._roles_lock = threading.Lock()
        super().__init__()

    def respond(self, body: dict) -> tuple[int, dict, float]:
        prompt = body["messages"][-1]["content"]
        if "A first draft of the answer" in prompt:
            role, text = "generate", self.revised
        elif prompt.startswith("Write the answer to the patient"):
            role, text = "draft", self.draft
        elif prompt.startswith("You are a medical reviewer"):
            role, text = "critic", json.dumps({"issues": [], "verdict": "no issues"})
        elif prompt.startswith("Improve the instructions"):
            role, text = "update", "You are a careful physician. Cite the evidence of every sentence."
        else:
            role, text = "gradient", "Tie every sentence to the evidence it cites."
        with self._roles_lock:
            self.roles.append(role)
        return 200, chat_body(text), 0.0


@pytest.fixture
def role_server():
    servers: list[RoleServer] = []

    def make(draft: str, revised: str) -> RoleServer:
        servers.append(RoleServer(draft, revised))
        return servers[-1]

    yield make
    for made in servers:
        made.close()


def test_med_textgrad_refines_the_draft(consultant, context, role_server, replies) -> None:
    FAITHFUL, DOSE = faithful(replies), replies["dose"]
    server = role_server(reply(*FAITHFUL[:2], DOSE), reply(*FAITHFUL))
    answer = consult(consultant, context, server, refine_iterations=1)
    assert [s["text"] for s in answer.details["sentences"] if s["by"] == "llm"] == [
        s["text"] for s in FAITHFUL
    ]
    assert answer.details["dropped"] == []  # the draft's dose was revised away
    assert server.roles[0] == "draft" and {"generate", "critic"} <= set(server.roles)
    assert step(answer, "consult.prose.refined").output["kept"] == "refined"
    assert any(s.name == "medtextgrad.summary" for s in answer.trace.steps)
    assert answer.usage.calls == len(server.requests)

    broken = role_server(reply(*FAITHFUL[:2]), NOT_JSON)
    answer = consult(consultant, context, broken, refine_iterations=1)
    assert step(answer, "consult.prose.refined").error_type == "StructuredOutputError"
    assert [s["text"] for s in answer.details["sentences"] if s["by"] == "llm"] == [
        s["text"] for s in FAITHFUL[:2]
    ]


def test_cli_prose_llm_end_to_end(home, role_server, replies) -> None:
    FAITHFUL, DOSE = faithful(replies), replies["dose"]
    server = role_server(reply(*FAITHFUL), reply(*FAITHFUL, DOSE))
    env = {
        "CLINRAG_HOME": str(home),  # the disease model the module built is loaded, not rebuilt
        "CLINRAG_LLM_BACKEND": "openai",
        "CLINRAG_LLM_BASE_URL": server.base_url,
        "CLINRAG_LLM_MODEL": "served-model",
        "CLINRAG_LLM_API_KEY": "k",
        **SCRIPTED_SETTINGS,
    }
    args = ("consult", "--prose", "llm", "-s", KNOWLEDGE, README_EXAMPLE)
    result = invoke_cli(*args, "--json", env=env)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    details = answer["details"]
    assert details["prose"] == "llm"
    assert [s["text"] for s in details["dropped"]] == [DOSE["text"]]
    written = [s for s in details["sentences"] if s["by"] == "llm"]
    assert [s["text"] for s in written] == [s["text"] for s in FAITHFUL]
    assert answer["text"] == render([Sentence.model_validate(s) for s in details["sentences"]])
    assert "draft" in server.roles and "generate" in server.roles
    assert answer["usage"]["calls"] == len(server.requests)
    # The consult_prose setting asks for the same without the flag.
    printed = invoke_cli(
        "consult", "-s", KNOWLEDGE, README_EXAMPLE, env=env | {"CLINRAG_CONSULT_PROSE": "llm"}
    )
    assert printed.returncode == 0, printed.stderr
    assert FAITHFUL[1]["text"] in printed.stdout
    assert "1 sentence(s) of the model dropped" in printed.stdout and "500 mg" not in printed.stdout
