"""The grounded consultation, measured (one JSON line):

(i) DDXPlus patients rendered as first-person text (`ddxplus-text`), answered by `consult` with the DDXPlus
    condition table as knowledge and the other patients as experience, against `knn-vote` from the coded
    findings of the same patients (`ddxplus`): GTPA@1 and @3, and their ratio. The DDXPlus table generated
    these patients, so (i) sees the generator (see README).
(ii) The hand-written common presentations (tests/data/consult/common_presentations.jsonl, written as a
    held-out set: no parameter was fitted to them; changes are judged on presentations_dev*.jsonl, written
    apart from it) on the packaged default knowledge: top-1 and top-3 hits.
(iii) `clinrag consult` as a user runs it on the README example: the first run on an empty home (the disease
    model is built) and a warm run, wall time and peak RSS of each, and their ratio.
(iv) Finding extraction on the dev texts (tests/data/consult/findings_dev.jsonl): milliseconds per text with
    the matching by meaning (MiniLM) against phrase matching alone, and their ratio.

    python benchmarks/bench_consult.py --data ../shared/data --limit 200 --seed 0
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clinrag.core.settings import Settings
from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder
from clinrag.eval.runner import EvalRunner, RunRequest

README_EXAMPLE = (
    "I am 45 and have had a fever, a productive cough and pain on the right side of my chest when I breathe "
    "for three days. What could this be and what should I do?"
)
CONSULT_DATA = Path(__file__).parents[1] / "tests" / "data" / "consult"
PRESENTATIONS = CONSULT_DATA / "common_presentations.jsonl"
FINDINGS_DEV = CONSULT_DATA / "findings_dev.jsonl"


def evaluate(settings: Settings, out: Path, **request) -> dict[str, float]:
    outcome = EvalRunner(settings, progress=False).run(RunRequest(out=out, **request))
    return {name: metric.mean for name, metric in outcome.summary.metrics.items()}


def timed_consult(home: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one `clinrag consult` process on `home`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "clinrag", "consult", "--json", README_EXAMPLE],
        capture_output=True,
        text=True,
        env={"CLINRAG_HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    # ru_maxrss of children is the largest child so far (KiB); each call here is larger or equal.
    peak = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
    return seconds, peak


def extraction_ms() -> tuple[float, float]:
    """Milliseconds per dev text: (phrases only, phrases and meaning), on HPO plus the lay symptom names."""
    from faker_healthcare.disease_correlations import DISEASE_CORRELATIONS

    from clinrag.methods.consult.findings import FindingExtractor
    from clinrag.methods.consult.vocabulary import Vocabulary

    lay = sorted({name for disease in DISEASE_CORRELATIONS.values() for name in disease["symptoms"]})
    vocabulary = Vocabulary.from_hpo().merge(Vocabulary.from_names(lay, "faker-diseases"))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ddxplus = (args.data / "ddxplus").resolve()

    with tempfile.TemporaryDirectory() as scratch:
        scratch_dir = Path(scratch)
        settings = Settings(home=scratch_dir / "home", data_dir=args.data)
        sample = {"limit": args.limit, "seed": args.seed, "data_path": ddxplus}
        text = evaluate(
            settings,
            scratch_dir / "text",
            dataset="ddxplus-text",
            method="consult",
            params={"knowledge": f"ddxplus:{ddxplus}"},
            **sample,
        )
        codes = evaluate(settings, scratch_dir / "codes", dataset="ddxplus", method="knn-vote", **sample)
        common = evaluate(
            settings, scratch_dir / "common", dataset="text-cases", method="consult", data_path=PRESENTATIONS
        )
        first_s, first_mb = timed_consult(scratch_dir / "fresh-home")
        warm_s, warm_mb = timed_consult(scratch_dir / "fresh-home")
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
                "first_run_s": round(first_s, 1),
                "warm_run_s": round(warm_s, 1),
                "first_vs_warm": round(first_s / warm_s, 2),
                "peak_rss_mb": round(max(first_mb, warm_mb)),
                "extract_phrases_ms": round(phrases_ms, 2),
                "extract_meaning_ms": round(meaning_ms, 2),
                "meaning_vs_phrases": round(meaning_ms / phrases_ms, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
