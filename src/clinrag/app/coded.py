"""A patient given as HPO codes — terms shown and excluded (an onset class among them: when the illness
began), or a GA4GH phenopacket — for the CLI's `consult --hpo/--not/--phenopacket` and the API's `hpo`,
`excluded_hpo` and `phenopacket` fields."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from clinrag.core.models import HPO_EXCLUDED, HPO_OBSERVED, HPO_ONSET, Demographics, PatientProfile
from clinrag.terms.hpo import hpo_id

if TYPE_CHECKING:
    from clinrag.eval.datasets.phenopackets import PhenopacketCase


def coded_patient(
    text: str, shown: Sequence[str], excluded: Sequence[str], packet: PhenopacketCase | None = None
) -> PatientProfile | None:
    """The patient as HPO codes: terms shown and excluded (each value comma-separated or one term) and a
    phenopacket's, with the packet's age and sex; None when no term is given."""
    observed = [hpo_id(term) for value in shown for term in value.split(",") if term.strip()]
    absent = [hpo_id(term) for value in excluded for term in value.split(",") if term.strip()]
    demographics = Demographics()
    onset = None
    if packet is not None:
        from clinrag.eval.datasets.phenopackets import onset_code  # protobuf's: loaded for a packet only

        observed += [term.id for term in packet.observed]
        absent += [term.id for term in packet.excluded]
        age = math.floor(packet.age) if packet.age is not None else None
        demographics = Demographics(age=age, sex=packet.sex)
        onset = onset_code(packet)
    if not observed and not absent:
        return None
    codes = {
        HPO_OBSERVED: list(dict.fromkeys(observed)),
        HPO_EXCLUDED: list(dict.fromkeys(absent)),
        HPO_ONSET: [onset] if onset else [],
    }
    return PatientProfile(initial_presentation=text, demographics=demographics, codes=codes)
