"""The ICD-10-CM chapters (2026 tabular list), read from the `simple-icd-10-cm` package.

The package is the single source of truth: chapter numbers, titles and code ranges are parsed from its
chapter descriptions, never typed in here. It parses its whole XML when imported (seconds), so it is imported
by the functions that read it, not by this module: importing the knowledge layer (every `clinrag consult`)
must not pay for it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from clinrag.core.errors import InvalidInputError

# "Diseases of the circulatory system (I00-I99)" → title, range
_DESCRIPTION = re.compile(r"^(?P<title>.+?)\s*\((?P<range>[A-Z]\d{2}-[A-Z][0-9A-Z]{2})\)$")
# Optional number (Arabic or Roman), optional title, optional "(range)": every part given must agree.
_REFERENCE = re.compile(
    r"^(?:(?:chapter|ch\.?)\s*)?"
    r"(?:(?P<number>\d{1,2}|[ivx]{1,5})(?:\s*[.:)\-–]\s*|\s+|$))?"
    r"(?P<title>.*?)\s*"
    r"(?:\(?(?P<range>[a-z]\d{2}-[a-z][0-9a-z]{2})\)?)?$",
    re.IGNORECASE,
)
_ROMAN = (("X", 10), ("IX", 9), ("V", 5), ("IV", 4), ("I", 1))


@dataclass(frozen=True)
class Chapter:
    number: int
    code_range: str
    title: str


@cache
def _chapters() -> tuple[Chapter, ...]:
    import simple_icd_10_cm as cm

    found = []
    for code in cm.get_all_codes(False):
        if not cm.is_chapter(code):
            continue
        description = cm.get_description(code)
        match = _DESCRIPTION.match(description)
        if match is None:
            raise ValueError(f"unexpected ICD-10-CM chapter description: {description!r}")
        found.append(Chapter(int(code), match["range"], match["title"]))
    return tuple(sorted(found, key=lambda c: c.number))


def chapters() -> list[Chapter]:
    """The 22 chapters of ICD-10-CM, in chapter order."""
    return list(_chapters())


def chapter(number: int) -> Chapter:
    """The chapter with this number; an unknown number raises InvalidInputError."""
    for candidate in _chapters():
        if candidate.number == number:
            return candidate
    raise InvalidInputError(f"no ICD-10-CM chapter {number!r} (chapters are 1-{len(_chapters())})")


def chapter_of(code: str) -> Chapter:
    """The chapter of a valid ICD-10-CM code or block, dotted or not ("I21.4", "I214", "J45", "A00-A09")."""
    import simple_icd_10_cm as cm

    normalized = code.strip().upper() if isinstance(code, str) else ""
    # the package also accepts a chapter's own identifier ("9"), which is not a code
    if not normalized or not cm.is_valid_item(normalized) or cm.is_chapter(normalized):
        raise InvalidInputError(f"not a valid ICD-10-CM code or block: {code!r}")
    return chapter(int(cm.get_ancestors(normalized)[-1]))


def parse_chapter_reference(value: object) -> int | None:
    """The chapter number that `value` names, or None when it names no chapter.

    Accepted: the number (9, "9", "IX", "Chapter 9"), the code range ("I00-I99"), the exact title (any case),
    or a combination as in a menu line ("9. Diseases of the circulatory system (I00-I99)") when its parts
    agree."""
    if isinstance(value, bool):  # bool is an int, but True is not chapter 1
        return None
    if isinstance(value, int):
        return value if any(c.number == value for c in _chapters()) else None
    if not isinstance(value, str):
        return None
    match = _REFERENCE.match(value.strip().rstrip("."))
    if match is None:
        return None
    resolvers = ((match["number"], _by_number), (match["title"], _by_title), (match["range"], _by_range))
    found = {resolve(text) for text, resolve in resolvers if text}
    if len(found) != 1 or None in found:
        return None
    return found.pop()


def chapter_menu() -> str:
    """The chapters one per line, e.g. "9. Diseases of the circulatory system (I00-I99)", for prompts."""
    return "\n".join(f"{c.number}. {c.title} ({c.code_range})" for c in _chapters())


def _by_number(text: str) -> int | None:
    number = int(text) if text.isdigit() else _roman_value(text.upper())
    return number if any(c.number == number for c in _chapters()) else None


def _by_title(text: str) -> int | None:
    wanted = " ".join(text.split()).casefold()
    return next((c.number for c in _chapters() if c.title.casefold() == wanted), None)


def _by_range(text: str) -> int | None:
    return next((c.number for c in _chapters() if c.code_range == text.upper()), None)


def _roman_value(text: str) -> int | None:
    """The value of a canonical Roman numeral below 40 ("IX" → 9); None for a malformed one ("IIII")."""
    value, rest = 0, text
    for symbol, amount in _ROMAN:
        while rest.startswith(symbol):
            value += amount
            rest = rest[len(symbol) :]
    return value if not rest and value and _to_roman(value) == text else None


def _to_roman(value: int) -> str:
    out = ""
    for symbol, amount in _ROMAN:
        count, value = divmod(value, amount)
        out += symbol * count
    return out
