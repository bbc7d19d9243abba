"""OpenKG's medicalgraph: `medical.json` of QASystemOnMedicalKG (Liu Huanyong), 8,807 diseases in Chinese,
the graph DeepDoctor-RAG's paper builds on. One JSON object a line, as MongoDB exports it (`_id` ignored).

Mapped: `symptom` → HAS_SYMPTOM, `check` → RECOMMEND_TEST, `common_drug` and `recommand_drug` →
RECOMMEND_DRUG, `cure_way` → RECOMMEND_CURE, `acompany` → HAS_COMORBIDITY, `desc` the description. The other
fields (departments, food, cost, cure rate, …) fit no label of the schema and are left out (noted in the
report). A line that is not a JSON object with a name is skipped and reported by its number."""

from __future__ import annotations

import json
from pathlib import Path

from clinrag.core.files import data_file, read_text
from clinrag.core.provenance import fingerprint
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords, SourceTraits, clean_name
from clinrag.graph.importers.registry import PATH, GraphSource, register
from clinrag.graph.schema import Relation

NAME = "medicalgraph"
FILE = "medical.json"
# the file's list fields and the relation each is
FIELDS = {
    "symptom": Relation.HAS_SYMPTOM,
    "check": Relation.RECOMMEND_TEST,
    "common_drug": Relation.RECOMMEND_DRUG,
    "recommand_drug": Relation.RECOMMEND_DRUG,
    "cure_way": Relation.RECOMMEND_CURE,
    "acompany": Relation.HAS_COMORBIDITY,
}
MALFORMED = "lines that are not a JSON object"
NO_NAME = "diseases without a name"
NO_RELATION = "diseases without symptoms, checks, drugs, cures or comorbidities"


def read_medicalgraph(path: str | Path, *, limit: int | None = None) -> SourceRecords:
    """Disease records from `medical.json` (or a folder holding it), at most `limit` of them."""
    file = data_file(path, FILE)
    text = read_text(file)
    result = SourceRecords(NAME, f"{NAME}:{path}", f"{fingerprint(file)}:limit={limit}")
    result.notes.append("departments, food, cost and cure rates: no label in the schema, left out")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if limit is not None and result.read >= limit:
            break
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if not isinstance(entry, dict):
            result.skips.add(MALFORMED, str(number))
            continue
        result.read += 1
        name = clean_name(entry.get("name"))
        if name is None:
            result.skips.add(NO_NAME, str(number))
            continue
        desc = entry.get("desc")
        record = DiseaseRecord(str(number), name, desc.strip() or None if isinstance(desc, str) else None)
        for field, relation in FIELDS.items():
            targets = entry.get(field) or []
            for target in targets if isinstance(targets, list) else [targets]:
                record.add(relation, target, result.skips)
        result.keep(record, NO_RELATION)
    return result


register(
    GraphSource(
        f"{NAME}:{PATH}",
        lambda path, limit: read_medicalgraph(path, limit=limit),
        SourceTraits(
            lay=True,
            askable=True,
            title="OpenKG medicalgraph (QASystemOnMedicalKG medical.json, Liu Huanyong)",
        ),
    )
)
