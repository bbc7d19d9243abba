"""A condition of the knowledge base as a card to read: what `clinrag knowledge show` prints."""

from __future__ import annotations

from clinrag.conditions.catalogue import Catalogue
from clinrag.conditions.records import Condition, how_often

_LEVELS = {
    "emergency": "emergency care now",
    "urgent": "be seen today",
    "soon": "see a doctor within days",
    "self_care": "self-care at home",
}


def card(condition: Condition, catalogue: Catalogue) -> str:
    numbers: dict[str, int] = {}  # source id → its number on the card

    def cite(ids: tuple[str, ...]) -> str:
        return "[" + ", ".join(str(numbers.setdefault(i, len(numbers) + 1)) for i in ids) + "]"

    names = "; ".join(f"{lang}: {', '.join(n)}" for lang, n in condition.names.items())
    lay = "; ".join(f"{lang}: {', '.join(n)}" for lang, n in condition.lay.items() if n)
    prevalence, onset, course = condition.prevalence, condition.onset, condition.course
    urgency = condition.urgency
    lines = [
        f"[bold]{condition.name}[/]  ICD-10-CM {condition.icd10} · {condition.system}"
        + (f" · DDXPlus: {condition.ddxplus}" if condition.ddxplus else ""),
        f"names: {names}",
        *([f"lay names: {lay}"] if lay else []),
        f"how common: {prevalence.primary_care.replace('_', ' ')} in primary care, "
        f"{prevalence.emergency.replace('_', ' ')} in emergency care ({prevalence.basis}) "
        + cite(prevalence.source),
        f"ages {onset.ages[0]:g}–{onset.ages[1]:g}"
        + (f" (usually {onset.typical_ages[0]:g}–{onset.typical_ages[1]:g})" if onset.typical_ages else "")
        + f", sex: {onset.sex.replace('_', ' ')} {cite(onset.source)}",
        f"course: {course.kind}, presents after {course.presents_within_days[0]:g}–"
        f"{course.presents_within_days[1]:g} days {cite(course.source)}",
        f"urgency: {_LEVELS[urgency.level]}"
        + ("; a diagnosis not to miss" if urgency.cant_miss else "")
        + f" {cite(urgency.source)}",
        "features:",
    ]
    for feature in condition.features:
        share = (
            f"{feature.frequency:.0%}"
            if isinstance(feature.frequency, float)
            else feature.frequency.replace("_", " ")
        )
        basis = "stated by the source" if feature.basis == "source" else "an estimate"
        kind = feature.kind.replace("_", " ")
        lines.append(
            f"  {feature.label} ({feature.code}, {kind}): {how_often(feature.share)} people with it — "
            f"{share}, {basis} {cite(feature.source)}"
        )
    for title, items in (("against it", condition.against), ("red flags", condition.red_flags)):
        if items:
            lines.append(f"{title}:")
            lines += [
                f"  {f.label} ({f.code})" + (f": {f.why}" if f.why else "") + f" {cite(f.source)}"
                for f in items
            ]
    if condition.tests:
        lines.append("tests:")
        lines += [f"  {t.name} ({t.use.replace('_', ' ')}) {cite(t.source)}" for t in condition.tests]
    if condition.management:
        lines.append("management:")
        lines += [f"  {m.text} {cite(m.source)}" for m in condition.management]
    lines.append("sources:")
    for source_id, number in numbers.items():
        source = catalogue.sources[source_id]
        lines.append(f"  [{number}] {source.citation()} {source.url}")
    return "\n".join(lines)
