"""What the consultant asks, names and holds back. Each default is written here once; the method's
`ConsultConfig` (`clinrag.methods.consult`) reads its defaults from here, as it reads the differential's from
`LikelihoodSettings` and the triage's from `TriageSettings`."""

from __future__ import annotations

from dataclasses import dataclass

from clinrag.core.models import DDX_SIZE


@dataclass(frozen=True)
class ConsultantSettings:
    questions: int = 3  # the next questions proposed
    candidate_diseases: int = 10  # questions come from the findings of this many leading diseases
    abstain_below: float = 0.1  # no diagnosis is put forward when the leading one has less
    # a dangerous diagnosis (`clinical_tables/cant_miss.jsonl`, or rated severe by its source) is named first
    # from this probability on
    cant_miss_above: float = 0.02
    # a question scores its information gain plus this times how much it would settle those diagnoses
    # (chosen on 400 DDXPlus patients of seed 1, benchmarks/bench_consult.py (ix); reported on seed 0)
    danger_weight: float = 0.3
    diagnoses: int = DDX_SIZE  # the differential's length
