"""Dataset loaders for the patient base: DDXPlus, DialMed and iCraft-MD files → `PatientRecord`s.

Every loader takes paths (nothing is downloaded) and returns `(records, LoadReport)`. The report says how
many records came out, which lines/rows were skipped and why, and which codes could not be decoded.

Failure policy (the same as the knowledge readers; files are read with `clinrag.core.files`):
- a missing or unreadable file (not UTF-8, not JSON, CSV without the expected columns) raises
  `DataFormatError`; a file that yields no record at all raises `DataFormatError` too;
- a broken record (bad literal, missing field) is skipped and reported, never fatal;
- an unknown DDXPlus evidence code or value is kept as its raw code and reported, never fatal;
- two records with the same id raise `InvalidInputError` (see `check_unique_ids`).

Python-literal columns (DDXPlus lists) are parsed with `ast.literal_eval` only, never `eval`."""

from __future__ import annotations

import ast
import csv
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.files import data_file, read_jsonl, read_text
from clinrag.patients.record import PatientRecord

# Reasons for skipping, phrased to read after a count: "skipped 3 rows with a bad literal: 4, 9, 12".
BAD_LITERALS = "rows with a bad Python literal"
INVALID_RECORDS = "records with missing or invalid fields"
EMPTY_NARRATIVES = "records without any narrative text"

DDXPLUS_COLUMNS = ("age", "top5_diagnoses", "sex", "diagnosis", "features", "feature_id")
# The columns of the official release CSVs (release_{train,validate,test}_patients) under the names above:
# the same values (the differential is the whole ranked list, not only the first five).
DDXPLUS_RELEASE_COLUMNS = {
    "AGE": "age",
    "DIFFERENTIAL_DIAGNOSIS": "top5_diagnoses",
    "SEX": "sex",
    "PATHOLOGY": "diagnosis",
    "EVIDENCES": "features",
    "INITIAL_EVIDENCE": "feature_id",
}
_SEX_WORDS = {"M": "male", "F": "female"}
VALUE_SEPARATOR = "_@_"
NOWHERE = "V_123"  # the value of a DDXPlus site evidence (pain location, radiation, …) that names no site
_SIDE = re.compile(r"^(?P<site>.*?)\s*\((?P<side>[RL])\)$")
_MASK = "[MASK]"
_YES_NO = {"Y": "Yes", "N": "No"}


@dataclass
class LoadReport:
    """What one load read and skipped. `skipped` maps a reason to where it happened (line numbers for JSONL,
    0-based data row indexes for CSV); `unknown_codes` counts codes that could not be decoded; `notes` counts
    other facts worth knowing (e.g. DialMed records whose patient already names a label drug)."""

    path: str
    records: int = 0
    skipped: dict[str, list[int | str]] = field(default_factory=dict)
    unknown_codes: Counter[str] = field(default_factory=Counter)
    notes: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str, where: int | str) -> None:
        self.skipped.setdefault(reason, []).append(where)

    def unknown(self, code: str) -> None:
        self.unknown_codes[code] += 1

    def note(self, what: str, count: int = 1) -> None:
        self.notes[what] = self.notes.get(what, 0) + count

    @property
    def skipped_count(self) -> int:
        return sum(len(places) for places in self.skipped.values())

    @property
    def unknown_count(self) -> int:
        """Occurrences of unknown codes (not distinct codes)."""
        return sum(self.unknown_codes.values())

    def unknown_examples(self, limit: int = 5) -> list[str]:
        return [code for code, _ in self.unknown_codes.most_common(limit)]

    def summary(self, max_listed: int = 10) -> str:
        parts = [f"{self.path}: {self.records} records"]
        for reason, places in self.skipped.items():
            shown = ", ".join(str(place) for place in places[:max_listed])
            if len(places) > max_listed:
                shown += f", … (+{len(places) - max_listed} more)"
            parts.append(f"skipped {len(places)} {reason}: {shown}")
        if self.unknown_codes:
            parts.append(
                f"{self.unknown_count} unknown codes ({len(self.unknown_codes)} distinct, e.g. "
                f"{', '.join(self.unknown_examples())})"
            )
        parts.extend(f"{count} {what}" for what, count in self.notes.items())
        return "; ".join(parts)


def check_unique_ids(records: Iterable[PatientRecord]) -> None:
    """Raise `InvalidInputError` naming the first ids that occur more than once."""
    counts = Counter(record.id for record in records)
    duplicates = [record_id for record_id, count in counts.items() if count > 1]
    if duplicates:
        raise InvalidInputError(f"duplicate patient ids: {', '.join(duplicates[:5])}")


# --- files --------------------------------------------------------------------------------------------


def _load_json_object(path: str | Path) -> dict[str, Any]:
    path = data_file(path)
    try:
        document = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise DataFormatError(f"{path}: not valid JSON (line {error.lineno}: {error.msg})") from None
    if not isinstance(document, dict):
        raise DataFormatError(f"{path}: expected a JSON object at the top level")
    return document


def _finish(records: list[PatientRecord], report: LoadReport) -> tuple[list[PatientRecord], LoadReport]:
    if not records:
        raise DataFormatError(f"no valid records: {report.summary()}")
    check_unique_ids(records)
    report.records = len(records)
    return records, report


# --- DDXPlus --------------------------------------------------------------------------------------------


def site_and_side(meaning: str) -> tuple[str, str]:
    """A DDXPlus body-site value's meaning split into the site and its side: "ear(R)" → ("ear", "R");
    a site without a side has "" ("forehead" → ("forehead", ""))."""
    match = _SIDE.match(meaning)
    return (match["site"], match["side"]) if match else (meaning, "")


class EvidenceDecoder:
    """Turns DDXPlus evidence codes ("E_91", "E_56_@_6", "E_54_@_V_192") into English findings using
    `release_evidences.json`. Unknown evidences or values are kept raw and recorded in a report."""

    def __init__(self, evidences: dict[str, Any]) -> None:
        self.evidences = evidences

    @classmethod
    def from_file(cls, path: str | Path) -> EvidenceDecoder:
        return cls(_load_json_object(path))

    @staticmethod
    def split(code: str) -> tuple[str, str | None]:
        name, separator, value = code.partition(VALUE_SEPARATOR)
        return name, (value if separator else None)

    @classmethod
    def values_by_evidence(cls, codes: Iterable[str]) -> dict[str, frozenset[str]]:
        """Evidence name → its coded values (empty for a binary evidence), for the evidences in `codes`."""
        values: dict[str, set[str]] = {}
        for code in codes:
            name, value = cls.split(code)
            bucket = values.setdefault(name, set())
            if value is not None:
                bucket.add(value)
        return {name: frozenset(found) for name, found in values.items()}

    def question(self, name: str) -> str | None:
        entry = self.evidences.get(name)
        text = entry.get("question_en") if isinstance(entry, dict) else None
        return text.strip() if isinstance(text, str) and text.strip() else None

    def is_antecedent(self, name: str) -> bool:
        entry = self.evidences.get(name)
        return bool(isinstance(entry, dict) and entry.get("is_antecedent"))

    def value_text(self, name: str, value: str, report: LoadReport | None = None) -> str:
        """The English meaning of a value: V_xxx through `value_meaning`, a number with its scale."""
        entry = self.evidences.get(name, {})
        meanings = entry.get("value_meaning") or {}
        if value in meanings:
            meaning = meanings[value]
            text = meaning.get("en") if isinstance(meaning, dict) else None
            if isinstance(text, str) and text.strip():
                return _YES_NO.get(text.strip(), text.strip())
        if value.startswith("V_"):
            if report is not None:
                report.unknown(f"{name}{VALUE_SEPARATOR}{value}")
            return value
        scale = [item for item in entry.get("possible-values") or [] if isinstance(item, int | float)]
        if scale and len(scale) == len(entry.get("possible-values") or []):
            return f"{value} (on a scale of {min(scale)} to {max(scale)})"
        return value

    def decode(self, codes: Sequence[str], report: LoadReport | None = None) -> list[tuple[str, str]]:
        """One (evidence name, finding) per evidence, in first-seen order; several values of the same
        evidence (multi-choice) are merged into one finding."""
        values: dict[str, list[str]] = {}
        for code in codes:
            name, value = self.split(code)
            bucket = values.setdefault(name, [])
            if value is not None and value not in bucket:
                bucket.append(value)
        findings = []
        for name, raw_values in values.items():
            question = self.question(name)
            if question is None:
                if report is not None:
                    report.unknown(name)
                shown = [f"{name}{VALUE_SEPARATOR}{value}" for value in raw_values] or [name]
                findings.append((name, ", ".join(shown)))
                continue
            if not raw_values:
                findings.append((name, f"{question} Yes"))
                continue
            answer = ", ".join(self.value_text(name, value, report) for value in raw_values)
            findings.append((name, f"{question} {answer}"))
        return findings


def load_ddxplus(
    patients_csv: str | Path,
    evidences_json: str | Path,
    conditions_json: str | Path | None = None,
) -> tuple[list[PatientRecord], LoadReport]:
    """DDXPlus patients (synthetic) with their evidences decoded to English. Ids are "ddxplus:<row index>"
    (0-based data row); skipped rows are reported by the same index."""
    path = data_file(patients_csv)
    decoder = EvidenceDecoder.from_file(evidences_json)
    conditions = _load_json_object(conditions_json) if conditions_json is not None else {}
    report = LoadReport(str(path))
    records = []
    for index, row in enumerate(ddxplus_rows(path)):
        try:
            features = ast.literal_eval(row["features"])
            differential = ast.literal_eval(row["top5_diagnoses"])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            report.skip(BAD_LITERALS, index)
            continue
        record = _ddxplus_record(index, row, features, differential, decoder, conditions, report)
        if record is None:
            report.skip(INVALID_RECORDS, index)
        else:
            records.append(record)
    return _finish(records, report)


def ddxplus_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a DDXPlus patients CSV, the official release's or the mini split's, under the mini
    split's column names (`DDXPLUS_COLUMNS`)."""
    reader = csv.DictReader(read_text(path).splitlines())
    fields = reader.fieldnames or []
    renamed = {name: DDXPLUS_RELEASE_COLUMNS.get(name, name) for name in fields}
    missing = [column for column in DDXPLUS_COLUMNS if column not in renamed.values()]
    if missing:
        raise DataFormatError(
            f"{path}: missing DDXPlus columns {', '.join(missing)} (or the release's "
            f"{', '.join(DDXPLUS_RELEASE_COLUMNS)})"
        )
    return [{renamed[name]: value for name, value in row.items() if name in renamed} for row in reader]


def _ddxplus_record(
    index: int,
    row: dict[str, str],
    features: Any,
    differential: Any,
    decoder: EvidenceDecoder,
    conditions: dict[str, Any],
    report: LoadReport,
) -> PatientRecord | None:
    diagnosis = (row.get("diagnosis") or "").strip()
    initial = (row.get("feature_id") or "").strip()
    sex = (row.get("sex") or "").strip().upper()
    try:
        age = int((row.get("age") or "").strip())
    except ValueError:
        return None
    if not (isinstance(features, list) and all(isinstance(code, str) for code in features)):
        return None
    if not (isinstance(differential, list) and all(_is_pair(item) for item in differential)):
        return None
    if not diagnosis or not initial:
        return None
    findings = decoder.decode(features, report)
    by_name = dict(findings)
    initial_name = decoder.split(initial)[0]
    initial_text = by_name.get(initial_name) or decoder.decode([initial], report)[0][1]
    symptoms = [text for name, text in findings if not decoder.is_antecedent(name)]
    history = [text for name, text in findings if decoder.is_antecedent(name)]
    lines = [
        f"{age}-year-old {_SEX_WORDS.get(sex, 'patient')}.",
        f"Initial complaint: {initial_text}",
    ]
    if symptoms:
        lines += ["Symptoms:", *(f"- {text}" for text in symptoms)]
    if history:
        lines += ["History and risk factors:", *(f"- {text}" for text in history)]
    structured: dict[str, Any] = {
        "diagnosis": diagnosis,
        "differential": [[str(name), float(prob)] for name, prob in differential],
        "initial_evidence": initial_text,
        "findings": [text for _, text in findings],
    }
    codes = {"evidence": list(features), "diagnosis": [diagnosis]}
    condition = conditions.get(diagnosis)
    if isinstance(condition, dict):
        if condition.get("icd10-id"):
            structured["icd10"] = str(condition["icd10-id"]).strip().upper()
            codes["icd10"] = [structured["icd10"]]
        if condition.get("severity") is not None:
            structured["severity"] = condition["severity"]
    elif conditions:
        report.unknown(f"condition:{diagnosis}")
    return PatientRecord(
        id=f"ddxplus:{index}",
        narrative="\n".join(lines),
        structured=structured,
        metadata={"age": age, "sex": sex, "language": "en", "source": "ddxplus"},
        codes=codes,
        source="ddxplus",
        synthetic=True,
    )


def _is_pair(item: Any) -> bool:
    return (
        isinstance(item, list | tuple)
        and len(item) == 2
        and isinstance(item[0], str)
        and isinstance(item[1], int | float)
    )


# --- DialMed --------------------------------------------------------------------------------------------


def load_dialmed(path: str | Path, split: str | None = None) -> tuple[list[PatientRecord], LoadReport]:
    """DialMed dialogues (Chinese). The narrative is the masked `dialog` without the turns that hold the
    doctor's drug recommendation ([MASK]); `original_dialog` is never used, so the label is not leaked by
    the recommendation itself. A patient may still name a drug they already took: such records are counted
    in `report.notes["records whose narrative names a label drug"]`. Ids are "dialmed:<split>:<line>", the
    split defaulting to the file stem ("test", "dev")."""
    reading = read_jsonl(path)
    split = split or Path(path).stem
    report = LoadReport(str(path))
    records = []
    for line, raw in reading:
        dialog, diseases, drugs = raw.get("dialog"), raw.get("disease"), raw.get("label")
        if not (_str_list(dialog) and _str_list(diseases) and _str_list(drugs)):
            report.skip(INVALID_RECORDS, line)
            continue
        turns = [turn.strip() for turn in dialog if turn.strip() and _MASK not in turn]
        if not turns:
            report.skip(EMPTY_NARRATIVES, line)
            continue
        narrative = "\n".join(turns)
        if any(drug and drug in narrative for drug in drugs):
            report.note("records whose narrative names a label drug")
        records.append(
            PatientRecord(
                id=f"dialmed:{split}:{line}",
                narrative=narrative,
                structured={"diseases": list(diseases), "drugs": list(drugs)},
                metadata={"language": "zh", "source": "dialmed", "split": split},
                codes={"diseases": list(diseases), "drugs": list(drugs)},
                source="dialmed",
            )
        )
    _merge_read_report(report, reading.report.skipped)
    return _finish(records, report)


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, str) for item in value)


def _merge_read_report(report: LoadReport, skipped: dict[str, list[int | str]]) -> None:
    for reason, places in skipped.items():
        for place in places:
            report.skip(reason, place)


# --- iCraft-MD ------------------------------------------------------------------------------------------


def load_icraft(
    path: str | Path, *, source: str = "icraft", dataset: str = "icraft_md"
) -> tuple[list[PatientRecord], LoadReport]:
    """iCraft-MD dermatology vignettes — or any MediQ-format file of vignettes split into atomic facts, such
    as MediQ's MedQA dev set — : the narrative is the atomic facts (`context`) joined as sentences, the
    first fact being the initial presentation. Ids are "<source>:<id>"; `dataset` names the origin in the
    records' metadata."""
    reading = read_jsonl(path)
    report = LoadReport(str(path))
    records = []
    for line, raw in reading:
        record_id, answer, context = raw.get("id"), raw.get("answer"), raw.get("context")
        facts = (
            [fact.strip() for fact in context if isinstance(fact, str)] if isinstance(context, list) else []
        )
        facts = [fact for fact in facts if fact]
        valid_id = isinstance(record_id, int | str) and not isinstance(record_id, bool) and str(record_id)
        if not (valid_id and isinstance(answer, str) and answer.strip() and facts):
            report.skip(INVALID_RECORDS, line)
            continue
        structured: dict[str, Any] = {
            "initial_presentation": facts[0],
            "facts": facts,
            "diagnosis": answer.strip(),
        }
        if isinstance(raw.get("options"), dict):
            structured["options"] = dict(raw["options"])
        records.append(
            PatientRecord(
                id=f"{source}:{record_id}",
                narrative=" ".join(_sentence(fact) for fact in facts),
                structured=structured,
                metadata={"language": "en", "source": dataset},
                codes={"diagnosis": [answer.strip()]},
                source=dataset,
            )
        )
    _merge_read_report(report, reading.report.skipped)
    return _finish(records, report)


def _sentence(fact: str) -> str:
    return fact if fact[-1] in ".!?" else fact + "."


PatientDataset = Literal["ddxplus", "dialmed", "icraft", "synthetic"]


def load_patient_dataset(
    dataset: PatientDataset, path: Path | None, n: int = 1000
) -> tuple[list[PatientRecord], LoadReport | None]:
    """Records of a patient dataset at `path` (DDXPlus: the patients CSV or its folder), or `n` SYNTHETIC
    patients for `synthetic` (no report: nothing was read)."""
    if dataset == "synthetic":
        from clinrag.patients.synthetic import generate_cohort

        return generate_cohort(n, seed=0), None
    if path is None:
        raise InvalidInputError(f"a path is required for the {dataset} dataset")
    if dataset == "ddxplus":
        # the error names the path given, or the file missing from the folder given
        patients_csv = data_file(path, "test_patients_mini.csv")
        folder = patients_csv.parent
        return load_ddxplus(
            patients_csv, folder / "release_evidences.json", folder / "release_conditions.json"
        )
    if dataset == "dialmed":
        return load_dialmed(path)
    if dataset == "icraft":
        return load_icraft(path)
    raise InvalidInputError(
        f"unknown patient dataset {dataset!r}; valid: {', '.join(get_args(PatientDataset))}"
    )
