"""What the configured chat model adds to MedQA's "most likely diagnosis" questions with their options (one
JSON line), beside the consultation's knowledge-only ranking and chance, measured in the same run:

- `consult`: every option ranked by the differential (`option_ranking`), GTPA@1 at its hash tie-break and
  with ties at the top counted as a fair draw;
- `model`: the options scored by the model alone (mean token log-likelihood, `ChatModel.score_options`);
- `consult_model_ties`: the consultation's ranking with its ties at the top broken by the model's scores
  instead of the hash — what "the model scores an option the knowledge does not name" would add.

Two splits: `dev`, MediQ's vignettes of MedQA's dev split (`medqa/mediq_dev_atomic_facts.jsonl`, where a
choice is made), and `test`, the US 4-option test split (`bench_consult.py` (vii), where it is reported).
The embedded SmolLM2-135M by default; a model server through the usual settings (`CLINRAG_LLM_*`).

    python benchmarks/bench_options_model.py --data ../shared/data --split dev
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from string import ascii_uppercase

from bench_consult import evaluate, options_cases, tie_fair_top1
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.factory import build_chat_model
from clinrag.tasks.templates import task_prompt

DIAGNOSIS = "most likely diagnosis"


def dev_cases(data: Path, out: Path) -> Path:
    """MediQ's dev vignettes that ask for the most likely diagnosis, as `text-cases` with options."""
    rows = [json.loads(line) for line in (data / "medqa" / "mediq_dev_atomic_facts.jsonl").open()]
    with out.open("w", encoding="utf-8") as handle:
        for row in rows:
            if DIAGNOSIS in row["question"].lower():
                text = " ".join([*row["context"], row["question"]])
                record = {"id": f"dev-{row['id']}", "text": text, "diagnosis": row["answer"]}
                handle.write(json.dumps({**record, "options": list(row["options"].values())}) + "\n")
    return out


def model_scores(model: ChatModel, text: str, options: list[str]) -> dict[str, float]:
    """Each option's mean token log-likelihood as the model's reply to the question."""
    case = Case(
        id="q",
        task="multiple_choice",
        question=text,
        options=dict(zip(ascii_uppercase[: len(options)], options, strict=True)),
    )
    scores = model.score_options(ChatRequest.of(task_prompt(case).render(case)), options)
    return dict(zip(options, scores.normalized("mean"), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch_dir = Path(scratch)
        settings = Settings(home=scratch_dir / "home", data_dir=args.data)
        if args.split == "dev":
            path = dev_cases(args.data, scratch_dir / "cases.jsonl")
        else:
            path, _ = options_cases("medqa", args.data, scratch_dir / "cases.jsonl", diagnosis_only=True)
        cases = {row["id"]: row for row in map(json.loads, path.open())}
        consult = evaluate(
            settings, scratch_dir / "run", dataset="text-cases", method="consult", data_path=path
        )
        fair = tie_fair_top1(scratch_dir / "run")
        model = build_chat_model(settings)
        model_hits = tie_hits = 0
        for line in (scratch_dir / "run" / "results.jsonl").open(encoding="utf-8"):
            result = json.loads(line)
            gold = result["gold"]["answer"]
            step = next(s for s in result["answer"]["trace"]["steps"] if s["name"] == "consult.options")
            # the options as the case loader gave them to the consultation (stripped)
            ranked = {text: probability for text, probability, *_ in step["output"]["options"]}
            scores = model_scores(model, cases[result["case_id"]]["text"], list(ranked))
            tied = [text for text, probability in ranked.items() if probability == max(ranked.values())]
            model_hits += max(scores, key=scores.__getitem__) == gold
            tie_hits += max(tied, key=scores.__getitem__) == gold
    n = len(cases)
    chance = sum(1 / len(case["options"]) for case in cases.values()) / n
    figures = {
        "consult_gtpa@1": round(consult["gtpa@1"], 4),
        "consult_tie_fair_gtpa@1": round(fair, 4),
        "model_gtpa@1": round(model_hits / n, 4),
        "consult_model_ties_gtpa@1": round(tie_hits / n, 4),
    }
    print(
        json.dumps(
            {
                "benchmark": "options_model",
                "split": args.split,
                "cases": n,
                "model": f"{model.backend}:{model.model}",
                "scoring": model.scoring_name,
                "chance": round(chance, 4),
                **figures,
                **{
                    name.replace("gtpa@1", "vs_chance"): round(value / chance, 3)
                    for name, value in figures.items()
                },
            }
        )
    )


if __name__ == "__main__":
    main()
