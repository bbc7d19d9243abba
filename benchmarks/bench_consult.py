"""The grounded consultation, measured (one JSON line):

(i) DDXPlus patients rendered as first-person text (`ddxplus-text`), answered by `consult` with the DDXPlus
    condition table as knowledge and the other patients as experience, against `knn-vote` from the coded
    findings of the same patients (`ddxplus`): GTPA@1 and @3, and their ratio. The DDXPlus table generated
    these patients, so (i) sees the generator (see README).
(ii) The hand-written common presentations (tests/data/consult/common_presentations.jsonl, written as a
    held-out set: no parameter was fitted to them; changes are judged on presentations_dev*.jsonl, written
    apart from it) on the packaged default knowledge: top-1 and top-3 hits.
(iii) `clinrag consult` as a user runs it on the README example: the first run on an empty home (the disease
    model is built, and the warm process started), warm runs answered by that process (their median), and in
    the same run the baseline: runs that load the compiled knowledge themselves (no warm process, as before
    #52); wall time and peak RSS, and their ratios.
(iv) Finding extraction on the dev texts (tests/data/consult/findings_dev.jsonl): milliseconds per text with
    the matching by meaning (MiniLM) against phrase matching alone, and their ratio; the precision and
    recall of every finding there, with the compiled pipeline of the packaged knowledge.
(v) Speed on a warm home: a consultation in process (p50 over the development presentations) against the
    whole `clinrag consult` process, and `POST /v1/consult` on a running `clinrag serve` (p50, one client)
    against the in-process p50; the compiled pipeline's load (the concept ruler saved with its phrases as
    its phrase matcher keeps them) against spaCy's SpanRuler adding its patterns again, as its own
    `from_disk` does.
(vi) The development presentations (presentations_dev*.jsonl) on the packaged knowledge: top-3 hits.
(vii) Questions that come with their options, on the packaged knowledge: MedQA's "most likely diagnosis"
    questions (the US test split) and iCraft-MD's vignettes, each option ranked (`option_ranking`): GTPA@1
    against chance (1 / the options), and the same with ties at the top counted as a fair draw (what any
    tie-break gives on average; the hash that breaks them moves a run's GTPA@1 by several points).
(viii) The lay development presentations of the 49 DDXPlus conditions (ddxplus_lay_dev.jsonl beside the
    others, written in patients' and parents' words by a helper session that never saw the engine):
    GTPA@1/3/10 on the packaged default knowledge and on the DDXPlus table with its patients as experience.
(x) The knowledge, by source (`--only knowledge` runs this part alone): the open-world development sets
    written apart from the code by a helper that never saw it (tests/data/consult/open_dev_tune.jsonl, on
    which settings may be chosen; open_dev_report.jsonl, reported and never tuned on; and the French and
    Chinese open_dev_multilingual.jsonl), the lay DDXPlus set and the hand-written presentations, each on the
    default knowledge and with one source left out or alone, beside the previous release's default (the
    test-data disease table in place of clinrag's knowledge base) in the same run: GTPA@1/3/10.
(ix) Questioning: DDXPlus patients (the same sample as (i)) tell only their chief complaint, age and sex;
    `consult` on the packaged DDXPlus table asks up to QUESTIONS questions, each answered from the patient's
    evidence codes (`record_answer`: one choice of a question the record answers yes is not known). With the
    questions' weight for dangerous diagnoses (`danger_weight`, the default) and without it (0, information
    gain alone): GTPA@1 after the questions, dangerous diagnoses missed (the
    patient has a dangerous one and it is not named among the diagnoses not to miss), and dangerous
    diagnoses the patient does not have left open (named as not to miss; per patient).

    python benchmarks/bench_consult.py --data ../shared/data --limit 200 --seed 0
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import httpx

from clinrag.consult.understand.finding_types import FindingStatus
from clinrag.consult.understand.vocabulary import Concept
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder
from clinrag.eval.datasets import load_dataset
from clinrag.eval.datasets.ddxplus_text import FirstPersonRenderer, introduction
from clinrag.eval.runner import EvalRunner, RunRequest
from clinrag.eval.sampling import sample_cases
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, build

README_EXAMPLE = (
    "I am 45 and have had a fever, a productive cough and pain on the right side of my chest when I breathe "
    "for three days. What could this be and what should I do?"
)
CONSULT_DATA = Path(__file__).parents[1] / "tests" / "data" / "consult"
PRESENTATIONS = CONSULT_DATA / "common_presentations.jsonl"
FINDINGS_DEV = CONSULT_DATA / "findings_dev.jsonl"
DEV_PRESENTATIONS = (CONSULT_DATA / "presentations_dev.jsonl", CONSULT_DATA / "presentations_dev2.jsonl")
LAY_DDXPLUS_DEV = CONSULT_DATA / "ddxplus_lay_dev.jsonl"
OPEN_DEV = {
    "open_tune": CONSULT_DATA / "open_dev_tune.jsonl",
    "open_report": CONSULT_DATA / "open_dev_report.jsonl",
    "open_multilingual": CONSULT_DATA / "open_dev_multilingual.jsonl",
    "lay_ddxplus": LAY_DDXPLUS_DEV,
    "common": PRESENTATIONS,
}
# the default knowledge, each source left out or alone, and the previous release's default
KNOWLEDGE = {
    "default": ConsultConfig().sources,
    "without_conditions": "packaged:hpo-diseases,packaged:ddxplus",
    "without_ddxplus": "packaged:conditions,packaged:hpo-diseases",
    "without_hpo": "packaged:conditions,packaged:ddxplus",
    "conditions_alone": "packaged:conditions",
    "with_disease_ontology": f"{ConsultConfig().sources},packaged:disease-ontology",
    "previous_default_test_data": "packaged:faker-diseases,packaged:hpo-diseases,packaged:ddxplus",
}
API_REQUESTS = 20
QUESTIONS = 5  # the questioning's budget in (ix)
WARM_IDLE_S = 120.0  # the warm process's idle time in the timed runs
WARM_RUNS = 5  # the warm run's figure is their median (one run on 2 shared cores varies by ±0.2 s)


def options_cases(dataset: str, data: Path, out: Path, diagnosis_only: bool) -> tuple[Path, float]:
    """A dataset's questions with options as `text-cases` (the correct option's text is the diagnosis), and
    the chance of a random pick; with `diagnosis_only`, the "most likely diagnosis" questions alone."""
    cases = [
        case
        for case in load_dataset(dataset, data_dir=data).cases
        if case.options and (not diagnosis_only or "most likely diagnosis" in case.question.lower())
    ]
    lines = []
    for case in cases:
        assert case.gold is not None and case.gold.answer is not None
        answer = case.options.get(case.gold.answer, case.gold.answer)  # a letter's option, or the text
        record = {
            "id": case.id,
            "text": case.question,
            "diagnosis": answer,
            "options": list(case.options.values()),
        }
        lines.append(json.dumps(record))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out, sum(1 / len(case.options) for case in cases) / len(cases)


def tie_fair_top1(run: Path) -> float:
    """GTPA@1 of a run with options, each case counted as the chance its gold wins a fair draw among the
    options tied at the top (1 / their number), not by the hash that breaks the tie: the figure every
    tie-break gives on average."""
    hits = []
    for line in (run / "results.jsonl").open(encoding="utf-8"):
        result = json.loads(line)
        step = next(s for s in result["answer"]["trace"]["steps"] if s["name"] == "consult.options")
        probabilities = {text: probability for text, probability, *_ in step["output"]["options"]}
        top = max(probabilities.values())
        tied = [text for text, probability in probabilities.items() if probability == top]
        hits.append(1 / len(tied) if result["gold"]["answer"] in tied else 0.0)
    return sum(hits) / len(hits)


def knowledge_ablation(settings: Settings, scratch: Path) -> dict[str, float]:
    """(x): GTPA@1/3/10 of every set of `OPEN_DEV` under every knowledge of `KNOWLEDGE`."""
    figures = {}
    for name, sources in KNOWLEDGE.items():
        for set_name, path in OPEN_DEV.items():
            scores = evaluate(
                settings,
                scratch / f"knowledge-{name}-{set_name}",
                dataset="text-cases",
                method="consult",
                data_path=path,
                params={"sources": sources},
            )
            figures |= {f"{set_name}_{name}_gtpa@{k}": round(scores[f"gtpa@{k}"], 4) for k in (1, 3, 10)}
    return figures


def evaluate(settings: Settings, out: Path, **request) -> dict[str, float]:
    outcome = EvalRunner(settings, progress=False).run(RunRequest(out=out, **request))
    return {name: metric.mean for name, metric in outcome.summary.metrics.items()}


def questioning(settings: Settings, ddxplus: Path, limit: int, seed: int) -> dict[str, dict[str, float]]:
    """(ix): per policy, GTPA@1 after the questions, the share of patients with a dangerous diagnosis that
    is not named, and the dangerous diagnoses left open per patient."""
    cases = sample_cases(load_dataset("ddxplus-interactive", ddxplus).cases, limit, seed)
    renderer = FirstPersonRenderer.from_file(ddxplus / "release_evidences.json")
    context = MethodContext(settings=settings)
    results = {}
    for name, weight in (("danger_weighted", ConsultConfig().danger_weight), ("gain_only", 0.0)):
        config = ConsultConfig(sources="packaged:ddxplus", danger_weight=weight)
        consultant = build(context, config).consultant
        diseases = consultant.differential.model.diseases
        dangerous = {disease.name for disease, d in zip(diseases, consultant.dangerous, strict=True) if d}
        choices = choice_questions(consultant.concepts.values())
        hits = missed = left_open = 0
        for case in cases:
            state = consultant.start(complaint(renderer, case))
            evidence = set(case.meta["hidden_evidence"])
            for _ in range(QUESTIONS + 1):
                report, _ = consultant.report(state)
                if len(state.answered) == QUESTIONS or not report.questions:
                    break
                concept = report.questions[0].concept
                said = record_answer(consultant.concepts[concept], choices, evidence)
                consultant.answer(state, concept, said)
            gold = case.gold.answer if case.gold else None
            named = {danger.name for danger in report.dangers}
            hits += bool(report.differential) and report.differential[0].name == gold
            missed += gold in dangerous and gold not in named
            left_open += len(named - {gold})
        results[name] = {
            "gtpa@1": round(hits / len(cases), 4),
            "dangers_missed": round(missed / len(cases), 4),
            "dangers_left_open": round(left_open / len(cases), 3),
        }
    return results


def choice_questions(concepts: Iterable[Concept]) -> dict[str, set[str]]:
    """Each id or code a question names as one of its choices → the codes of the questions naming it."""
    questions: dict[str, set[str]] = {}
    for concept in concepts:
        for kind in concept.kinds:
            questions.setdefault(kind, set()).update(concept.codes)
    return questions


def record_answer(concept: Concept, choices: dict[str, set[str]], evidence: set[str]) -> FindingStatus:
    """What a DDXPlus record says of a concept: present where it has one of the concept's codes; not known
    where it only answers yes to a question offering the concept as one choice ("nasal congestion or a clear
    runny nose" says nothing of the runny nose alone); absent otherwise."""
    if set(concept.codes) & evidence:
        return "present"
    named = {*concept.ids, *concept.codes}
    if any(choices.get(name, set()) & evidence for name in named):
        return "uncertain"
    return "absent"


def complaint(renderer: FirstPersonRenderer, case: Case) -> str:
    """A DDXPlus patient's age, sex and chief complaint, in the first person."""
    assert case.patient is not None
    demographics = case.patient.demographics
    chief, _, _ = renderer.sentences([case.meta["initial_evidence"]], case.meta["initial_evidence"])
    return " ".join([introduction(demographics.age, demographics.sex), *chief])


# Runs the command in a child of this small process and prints the child's peak RSS (KiB): measured from the
# benchmark's own process, a forked child's peak would count the benchmark's pages it shared before exec.
_PEAK_RSS = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss, file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def timed_consult(home: Path, warm_s: float = 0.0) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one `clinrag consult` process on `home`; with `warm_s`, the warm
    process (`app/warm.py`) is asked, or started for the next run."""
    command = [sys.executable, "-m", "clinrag", "consult", "--json", README_EXAMPLE]
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={"CLINRAG_HOME": str(home), "PATH": "/usr/bin:/bin", "CLINRAG_CONSULT_WARM_S": str(warm_s)},
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    return seconds, int(result.stderr.strip().splitlines()[-1]) / 1024


def speed(home: Path) -> dict[str, float]:
    """(iii) and (v): `clinrag consult` first, warm and loading its own knowledge; in process; over HTTP."""
    first_s, first_mb = timed_consult(home, WARM_IDLE_S)  # builds the knowledge, starts the warm process
    listening(home)
    warm = [timed_consult(home, WARM_IDLE_S) for _ in range(WARM_RUNS)]
    subprocess.run(["pkill", "-f", f"clinrag.app.warm {home / 'run'}"], check=False)
    loaded = [timed_consult(home) for _ in range(WARM_RUNS)]  # each run loads the knowledge itself
    warm_s, warm_mb = statistics.median(s for s, _ in warm), max(mb for _, mb in warm)
    loaded_s = statistics.median(s for s, _ in loaded)
    consult_ms, post_ms = in_process_ms(home), api_ms(home)
    return {
        "first_run_s": round(first_s, 1),
        "warm_run_s": round(warm_s, 2),
        "first_vs_warm": round(first_s / warm_s, 2),
        "loading_run_s": round(loaded_s, 2),
        "warm_vs_loading_run": round(warm_s / loaded_s, 3),
        "peak_rss_mb": round(max(first_mb, warm_mb)),
        "in_process_p50_ms": round(consult_ms, 1),
        "in_process_vs_warm_run": round(consult_ms / 1000 / warm_s, 4),
        "api_p50_ms": round(post_ms, 1),
        "api_vs_in_process": round(post_ms / consult_ms, 2),
    }


def listening(home: Path, seconds: float = 300.0) -> None:
    """Wait until the warm process the first run started listens on its socket."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for path in (home / "run").glob("consult-*.sock"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                if probe.connect_ex(str(path)) == 0:
                    return
        time.sleep(0.5)
    raise SystemExit(f"no warm consultation process listened under {home / 'run'}")


def extraction_ms() -> tuple[float, float]:
    """Milliseconds per dev text: (phrases only, phrases and meaning), on HPO plus the lay symptom names."""
    from faker_healthcare.disease_correlations import DISEASE_CORRELATIONS

    from clinrag.consult.understand.findings import FindingExtractor
    from clinrag.consult.understand.vocabulary import Vocabulary

    lay = sorted({name for disease in DISEASE_CORRELATIONS.values() for name in disease["symptoms"]})
    vocabulary = Vocabulary.from_hpo().merge(Vocabulary.of_source("packaged:faker-diseases", lay))
    texts = [json.loads(line)["text"] for line in FINDINGS_DEV.read_text(encoding="utf-8").splitlines()]
    timings = []
    for extractor in (
        FindingExtractor(vocabulary),
        FindingExtractor(vocabulary, MiniLMOnnxEmbedder(), lay_names=lay),
    ):
        extractor.extract(texts[0])  # pipelines warmed
        started = time.perf_counter()
        for text in texts:
            extractor.extract(text)
        timings.append((time.perf_counter() - started) * 1000 / len(texts))
    return timings[0], timings[1]


def findings_scores(home: Path) -> tuple[float, float]:
    """(precision, recall) of every finding of the dev texts, by the compiled pipeline of the packaged
    knowledge (a gold "A|B" accepts either concept)."""
    from clinrag.methods.base import MethodContext
    from clinrag.methods.consult import ConsultConfig, build_consultant

    consultant = build_consultant(MethodContext(settings=Settings(home=home)), ConsultConfig())
    extractor = consultant.extractors("en")
    predicted = gold = correct = 0
    for line in FINDINGS_DEV.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        got: dict[str, str] = {}
        for finding in extractor.extract(row["text"]).findings:
            got.setdefault(finding.concept_id, finding.status)
        predicted += len(got)
        for names, status in row["findings"].items():
            ids = {extractor.vocabulary.lookup(name).id for name in names.split("|")}
            gold += 1
            correct += any(got.get(concept) == status for concept in ids)
    return correct / predicted, correct / gold


def in_process_ms(home: Path) -> float:
    """p50 milliseconds of one consultation (findings to cited answer) in a warm process."""
    from clinrag.core.models import Case
    from clinrag.methods.base import MethodContext
    from clinrag.methods.consult import ConsultConfig, ConsultMethod, build_consultant

    method = ConsultMethod(build_consultant(MethodContext(settings=Settings(home=home)), ConsultConfig()))
    texts = [json.loads(line)["text"] for path in DEV_PRESENTATIONS for line in path.open(encoding="utf-8")]
    method.answer(Case(id="warm", question=texts[0]))
    timings = []
    for k, text in enumerate(texts):
        started = time.perf_counter()
        method.answer(Case(id=f"c{k}", question=text))
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def api_ms(home: Path) -> float:
    """p50 milliseconds of POST /v1/consult (the README example) on `clinrag serve` over loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"CLINRAG_HOME": str(home), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-m", "clinrag", "serve", "--port", str(port), "--log-level", "warning"]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise SystemExit(server.stderr.read().decode() if server.stderr else "the server exited")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.3)
        body = {"text": README_EXAMPLE}
        with httpx.Client(timeout=300) as client:
            client.post(f"{url}/v1/consult", json=body).raise_for_status()  # builds the method once
            timings = []
            for _ in range(API_REQUESTS):
                started = time.perf_counter()
                client.post(f"{url}/v1/consult", json=body).raise_for_status()
                timings.append((time.perf_counter() - started) * 1000)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return statistics.median(timings)


_LOAD_COMPILED = """
import sys, time, spacy
from clinrag.consult.understand import findings  # registers the pipeline's factories
from clinrag.consult.compiled import NOT_SAVED
started = time.perf_counter()
spacy.load(sys.argv[1], exclude=NOT_SAVED)
print(time.perf_counter() - started)
"""
_ADD_PATTERNS = """
import sys, time, spacy, srsly
patterns = list(srsly.read_jsonl(sys.argv[1]))
nlp = spacy.blank("en")
ruler = nlp.add_pipe("span_ruler", config={"phrase_matcher_attr": "LOWER"})
started = time.perf_counter()
ruler.add_patterns(patterns)
print(time.perf_counter() - started)
"""


def ruler_loads(home: Path) -> tuple[float, float]:
    """Seconds, each in a fresh process (a process that has seen the words before makes both look cheap), to
    load the compiled English pipeline, and to give a plain SpanRuler its patterns again as its own
    `from_disk` does."""
    (folder,) = home.glob("consult-*/compiled-*/pipeline-en")

    def timed(script: str, argument: Path) -> float:
        result = subprocess.run(
            [sys.executable, "-c", script, str(argument)], capture_output=True, text=True, check=True
        )
        return float(result.stdout.strip().splitlines()[-1])

    return timed(_LOAD_COMPILED, folder), timed(_ADD_PATTERNS, folder / "concepts" / "patterns")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--only",
        choices=["knowledge", "speed"],
        help="run one part alone: (x) the knowledge, or (iii) and (v) the speed",
    )
    args = parser.parse_args()
    ddxplus = (args.data / "ddxplus").resolve()
    if args.only == "speed":
        with tempfile.TemporaryDirectory() as scratch:
            print(json.dumps({"benchmark": "consult_speed", **speed(Path(scratch) / "fresh-home")}))
        return
    if args.only == "knowledge":
        with tempfile.TemporaryDirectory() as scratch:
            settings = Settings(home=Path(scratch) / "home", data_dir=args.data)
            cases = {name: sum(1 for _ in path.open()) for name, path in OPEN_DEV.items()}
            figures = knowledge_ablation(settings, Path(scratch))
        print(json.dumps({"benchmark": "consult_knowledge", "world": "open", "cases": cases, **figures}))
        return

    with tempfile.TemporaryDirectory() as scratch:
        scratch_dir = Path(scratch)
        settings = Settings(home=scratch_dir / "home", data_dir=args.data)
        sample = {"limit": args.limit, "seed": args.seed, "data_path": ddxplus}
        text = evaluate(
            settings,
            scratch_dir / "text",
            dataset="ddxplus-text",
            method="consult",
            params={"sources": f"ddxplus:{ddxplus}"},
            **sample,
        )
        codes = evaluate(settings, scratch_dir / "codes", dataset="ddxplus", method="knn-vote", **sample)
        common = evaluate(
            settings, scratch_dir / "common", dataset="text-cases", method="consult", data_path=PRESENTATIONS
        )
        dev = [
            evaluate(
                settings, scratch_dir / f"dev{k}", dataset="text-cases", method="consult", data_path=path
            )
            for k, path in enumerate(DEV_PRESENTATIONS)
        ]
        lay = {
            name: evaluate(
                settings,
                scratch_dir / f"lay-{name}",
                dataset="text-cases",
                method="consult",
                data_path=LAY_DDXPLUS_DEV,
                params=params,
            )
            for name, params in (
                ("default", {}),
                ("ddxplus", {"sources": f"ddxplus:{ddxplus}", "patients": f"ddxplus:{ddxplus}"}),
            )
        }
        with_options = {}
        for name, dataset, diagnosis_only in (("medqa", "medqa", True), ("icraft", "icraft-md", False)):
            path, chance = options_cases(dataset, args.data, scratch_dir / f"{name}.jsonl", diagnosis_only)
            scores = evaluate(
                settings, scratch_dir / name, dataset="text-cases", method="consult", data_path=path
            )
            with_options[name] = (
                sum(1 for _ in path.open()),
                scores["gtpa@1"],
                tie_fair_top1(scratch_dir / name),
                chance,
            )
        asked = questioning(settings, ddxplus, args.limit, args.seed)
        knowledge = knowledge_ablation(settings, scratch_dir)
        home = scratch_dir / "fresh-home"
        timings = speed(home)
        precision, recall = findings_scores(home)
        compiled_load_s, ruler_add_s = ruler_loads(home)
    phrases_ms, meaning_ms = extraction_ms()

    print(
        json.dumps(
            {
                "benchmark": "consult",
                "ddxplus_text_cases": args.limit,
                "seed": args.seed,
                "text_gtpa@1": round(text["gtpa@1"], 4),
                "text_gtpa@3": round(text["gtpa@3"], 4),
                "codes_knn_gtpa@1": round(codes["gtpa@1"], 4),
                "codes_knn_gtpa@3": round(codes["gtpa@3"], 4),
                "text_vs_codes_gtpa@1": round(text["gtpa@1"] / codes["gtpa@1"], 4),
                "presentations": sum(1 for _ in PRESENTATIONS.open()),
                "presentations_top1": round(common["gtpa@1"], 4),
                "presentations_top3": round(common["gtpa@3"], 4),
                "dev_presentations_top3": [round(d["gtpa@3"], 4) for d in dev],
                **{
                    f"ddxplus_lay_dev_{name}_gtpa@{k}": round(scores[f"gtpa@{k}"], 4)
                    for name, scores in lay.items()
                    for k in (1, 3, 10)
                },
                **{
                    f"{name}_with_options_{key}": round(value, 4)
                    for name, (cases, gtpa, fair, chance) in with_options.items()
                    for key, value in (
                        ("cases", cases),
                        ("gtpa@1", gtpa),
                        ("tie_fair_gtpa@1", fair),
                        ("chance", chance),
                    )
                },
                **knowledge,
                "questioning_budget": QUESTIONS,
                **{
                    f"questioning_{policy}_{key}": value
                    for policy, scores in asked.items()
                    for key, value in scores.items()
                },
                "findings_dev_precision": round(precision, 3),
                "findings_dev_recall": round(recall, 3),
                **timings,
                "pipeline_load_s": round(compiled_load_s, 2),
                "span_ruler_add_patterns_s": round(ruler_add_s, 2),
                "pipeline_load_vs_add_patterns": round(compiled_load_s / ruler_add_s, 2),
                "extract_phrases_ms": round(phrases_ms, 2),
                "extract_meaning_ms": round(meaning_ms, 2),
                "meaning_vs_phrases": round(meaning_ms / phrases_ms, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
