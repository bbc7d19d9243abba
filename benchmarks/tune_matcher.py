"""Re-derive the question matcher's threshold (`interviewee.MATCH_THRESHOLD`): the cosine above which a
doctor's free-text question is taken for a DDXPlus catalogue question and answered from the coded profile.

Paraphrases of catalogue questions (each with the evidence it asks about) and questions that no catalogue
question answers are embedded with the packaged MiniLM, the same embedder the tests use. For each threshold:
precision (accepted questions matched to the right evidence), recall (paraphrases accepted and matched
right) and how many out-of-catalogue questions would be answered. The chosen threshold maximises F1; among
equally good thresholds, the middle one, so that the margin to both kinds of error is largest. Prints one
JSON line.

    .venv/bin/python benchmarks/tune_matcher.py --data /work/shared/data/ddxplus
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder
from clinrag.methods.meddx.interviewee import MATCH_THRESHOLD, QuestionMatcher
from clinrag.methods.meddx.structured_patient import evidence_catalogue

# Written for this benchmark: how a doctor might ask, not the catalogue's wording.
PARAPHRASES = {
    "Are you coughing?": "E_201",
    "Have you traveled out of the country recently?": "E_204",
    "Any shortness of breath?": "E_66",
    "Have you had a temperature?": "E_91",
    "Is your throat sore?": "E_97",
    "Do you smoke?": "E_79",
    "Are you diabetic?": "E_69",
    "Could you be pregnant?": "E_167",
    "Have you had loose stools or diarrhea?": "E_51",
    "Is your nose blocked or runny?": "E_181",
    "Have you been throwing up?": "E_211",
    "Did you pass out?": "E_159",
    "Has your voice gone hoarse?": "E_212",
    "Have you coughed up any blood?": "E_45",
    "Do you feel your heart racing or skipping beats?": "E_155",
    "Have you been sweating a lot more than usual?": "E_50",
    "Do you have asthma?": "E_124",
    "Have you lost weight without trying?": "E_162",
    "Are your lymph nodes swollen?": "E_9",
    "Do you drink a lot of alcohol?": "E_78",
    "Does it hurt more when you take a deep breath?": "E_220",
    "Do you wake up at night short of breath?": "E_67",
    "Do you have COPD?": "E_123",
    "Are you on steroids?": "E_44",
}
OUT_OF_CATALOGUE = [
    "How old are you?",
    "What brings you in today?",
    "What is your name?",
    "How long have you had these symptoms?",
    "What do you do for a living?",
    "Do you have any allergies to medications?",
    "Are you married?",
    "What medications are you currently taking?",
    "Do you have any questions for me?",
    "Where do you live?",
    "How did you sleep last night?",
    "Is there anything else you would like to tell me?",
    "What is your blood type?",
    "How many children do you have?",
    "What did you eat for breakfast?",
]
THRESHOLDS = [round(0.30 + 0.05 * i, 2) for i in range(13)]  # 0.30 … 0.90


def sweep(
    paraphrases: list[tuple[str | None, float, str]], others: list[float]
) -> list[dict[str, float | int]]:
    """paraphrases: (matched evidence, score, expected evidence); others: the best score of each
    out-of-catalogue question."""
    rows = []
    for threshold in THRESHOLDS:
        right = sum(found == expected and s >= threshold for found, s, expected in paraphrases)
        wrong = sum(found != expected and s >= threshold for found, s, expected in paraphrases)
        answered = sum(s >= threshold for s in others)
        accepted = right + wrong + answered
        precision = right / accepted if accepted else 1.0
        recall = right / len(paraphrases)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        rows.append(
            {
                "threshold": threshold,
                "precision": round(precision, 4),
                "recall": round(recall, 4),
                "f1": round(f1, 4),
                "out_of_catalogue_answered": answered,
                "paraphrases_misrouted": wrong,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=Path("../shared/data/ddxplus"))
    args = parser.parse_args()
    catalogue = evidence_catalogue(str(args.data / "release_evidences.json"))
    matcher = QuestionMatcher(catalogue, MiniLMOnnxEmbedder())
    paraphrases = [(*matcher.match(q), evidence) for q, evidence in PARAPHRASES.items()]
    others = [matcher.match(q)[1] for q in OUT_OF_CATALOGUE]
    rows = sweep(paraphrases, others)
    top = max(r["f1"] for r in rows)
    tied = [r["threshold"] for r in rows if r["f1"] == top]
    chosen = tied[len(tied) // 2]
    print(
        json.dumps(
            {
                "benchmark": "tune_matcher",
                "paraphrases": len(paraphrases),
                "out_of_catalogue": len(others),
                "paraphrase_scores": {
                    q: {"score": round(s, 4), "matched": found, "expected": expected}
                    for q, (found, s, expected) in zip(PARAPHRASES, paraphrases, strict=True)
                },
                "out_of_catalogue_best": {
                    q: round(s, 4) for q, s in zip(OUT_OF_CATALOGUE, others, strict=True)
                },
                "sweep": rows,
                "best_f1_thresholds": tied,
                "chosen": chosen,
                "current": MATCH_THRESHOLD,
                "current_reproduced": abs(chosen - MATCH_THRESHOLD) < 1e-9,
            }
        )
    )


if __name__ == "__main__":
    main()
