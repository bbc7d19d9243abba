"""Reading a structured result out of a model's reply: the one option a reply commits to, a ranked
differential, a multi-option selection — in English, Chinese and French, from JSON or free text.

Parsers never fall back to a default: a reply that names no valid option raises `AnswerParseError` carrying
the raw reply.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import json_repair

from clinrag.core.errors import AnswerParseError
from clinrag.core.models import DDX_SIZE, RankedDiagnosis, StructuredResult


@dataclass(frozen=True)
class ParsedReply:
    """A parsed reply: the structured result, the cleaned reply text, and the reply items that named no
    option (dropped, kept so a method can record how much of the reply was unusable)."""

    result: StructuredResult
    text: str
    dropped: list[str] = field(default_factory=list)


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def clean_reply(text: str) -> str:
    """The reply without reasoning blocks, code fences around it, or surrounding whitespace."""
    cleaned = _THINK.sub("", text).strip()
    fenced = _FENCE.match(cleaned)
    if fenced:
        cleaned = fenced.group(1).strip()
    return re.sub(r"\n{3,}", "\n\n", cleaned)


def _norm(text: str) -> str:
    # NFKC folds full-width forms ("Ａ", "：", "，") to ASCII, so Chinese replies match ASCII keys.
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


class OptionMatcher:
    """Maps reply fragments to option keys: by key or option text, exactly or after normalisation."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.by_norm: dict[str, str] = {}
        for key, text in options.items():
            self.by_norm.setdefault(_norm(text), key)
        for key in options:
            self.by_norm.setdefault(_norm(key), key)
        # Surfaces tried at a position, longest first so "Unstable angina" wins over "Stable angina".
        surfaces = {(key, key) for key in options} | {(text, key) for key, text in options.items()}
        self.surfaces = sorted(surfaces, key=lambda pair: -len(pair[0]))

    def exact(self, item: str) -> str | None:
        item = item.strip()
        if item in self.options:
            return item
        return self.by_norm.get(_norm(item))

    def at(self, text: str, pos: int) -> str | None:
        """The option named at `pos` in `text` (after opening brackets or quotes), or None."""
        pos += len(re.match(r"[\s\"'“”‘’「」『』(\[（【*]*", text[pos:]).group(0))
        for surface, key in self.surfaces:
            candidate = text[pos : pos + len(surface)]
            # Single-letter keys are case-sensitive: in "the answer is a beta-lactam" "a" is not option A.
            same = candidate == surface if len(surface) == 1 else candidate.casefold() == surface.casefold()
            if same and not _continues_word(surface, text, pos + len(surface)):
                return key
        return None

    def mentions(self, text: str) -> list[str]:
        """Keys of option texts mentioned in `text`, in order; a mention inside a longer mention is not
        counted, and single letters are never read as mentions."""
        lowered = unicodedata.normalize("NFKC", text).casefold()
        spans: list[tuple[int, int, str]] = []
        for key, option in self.options.items():
            needle = unicodedata.normalize("NFKC", option).casefold()
            if len(needle) < 2:
                continue
            for found in re.finditer(re.escape(needle), lowered):
                start, end = found.span()
                before = lowered[start - 1] if start else " "
                inside_word = needle[0].isascii() and before.isascii() and before.isalnum()
                if not inside_word and not _continues_word(needle, lowered, end):
                    spans.append((start, end, key))
        kept = [s for s in spans if not any(o[0] <= s[0] and s[1] <= o[1] and o != s for o in spans)]
        return list(dict.fromkeys(key for _, _, key in sorted(kept)))


def _continues_word(surface: str, text: str, end: int) -> bool:
    # Only ASCII words have boundaries worth checking; Chinese text has no spaces between words.
    last, following = surface[-1], text[end] if end < len(text) else " "
    return last.isascii() and last.isalnum() and following.isascii() and following.isalnum()


def _load_json(text: str) -> Any:
    """The reply as JSON when it is meant as JSON (starts with { or [), repaired once; None otherwise."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        repaired = json_repair.loads(stripped)
        return repaired if isinstance(repaired, dict | list) and repaired else None


# Phrases after which a reply names its answer, in the three prompt languages.
_MARKER = re.compile(
    r"(?:(?<![A-Za-z])(?:final\s+answer|answer|diagnosis|choice|réponse|diagnostic|choix)"
    r"\s*(?:is|est|:|=)?\s*(?:option\s+|l['’]option\s+)?"
    r"|(?:答案|选项|我选择|选择|应选|我选|最可能的诊断|诊断|预测的疾病|疾病)\s*(?:是|为)?\s*:?\s*(?:选项)?)",
    re.IGNORECASE,
)


def parse_single(text: str, options: dict[str, str], *, raw: str | None = None) -> str:
    """The one option key a reply commits to. Tries: JSON {"answer": …}; a key or option text right after
    an answer phrase ("Answer: B", "答案：Ａ", "选项A", "疾病：急性胃肠炎", "Réponse : C"); `parse_choice`;
    exactly one option text mentioned (a text inside a longer mentioned one does not count)."""
    raw = text if raw is None else raw
    matcher = OptionMatcher(options)
    loaded = _load_json(text)
    if isinstance(loaded, dict):
        value = next((loaded[k] for k in ("answer", "diagnosis", "disease") if k in loaded), None)
        key = matcher.exact(value) if isinstance(value, str) else None
        if key is None:
            raise AnswerParseError(
                f"the JSON answer {value!r} is not one of the options {list(options)}", raw
            )
        return key

    normalized = unicodedata.normalize("NFKC", text)
    marked = {key for m in _MARKER.finditer(normalized) if (key := matcher.at(normalized, m.end()))}
    if len(marked) == 1:
        return marked.pop()
    try:
        return parse_choice(normalized, options)
    except AnswerParseError:
        pass
    mentioned = matcher.mentions(normalized)
    if len(mentioned) == 1:
        return mentioned[0]
    raise AnswerParseError(f"the answer does not commit to exactly one of the options {list(options)}", raw)


_ENUMERATOR = re.compile(r"^\s*(?:\(?\d{1,2}\s*[.)、:：]|\(\d{1,2}\)|[-*•·])\s*")
_PROBABILITY = re.compile(r"[\s:：,，\-–—(（\[]*(\d{1,3}(?:\.\d+)?)\s*([%％])?\s*[)）\]]?\s*$")
_PAREN_TAIL = re.compile(r"\s*[(（][^()（）]*[)）]\s*$")
_ITEM_SPLIT = re.compile(r"[,;，；、]")


def _strip_item(item: str) -> str:
    item = _ENUMERATOR.sub("", item).strip()
    return item.strip("*_`\"'“”‘’「」 ").rstrip(".。").strip()


def _variants(item: str) -> list[str]:
    """The item, then the item without a trailing probability or parenthetical, then without a label
    ("Diagnosis: …"): names such as "HIV (initial infection)" match before their brackets are stripped."""
    variants = [item]
    bare = _PROBABILITY.sub("", item)
    bare = _PAREN_TAIL.sub("", bare).strip()
    variants.append(bare)
    for candidate in (item, bare):
        if re.search(r"[:：]", candidate):
            variants.append(re.split(r"[:：]", candidate)[-1].strip())
    return [_strip_item(v) for v in variants if v.strip()]


def _probability(item: str) -> float | None:
    found = _PROBABILITY.search(item)
    if not found:
        return None
    value = float(found.group(1))
    if found.group(2):
        return value / 100 if value <= 100 else None
    return value if "." in found.group(1) and value <= 1 else None


def _items(text: str, matcher: OptionMatcher) -> list[str]:
    """Reply items: one per line of a list, or the comma-/semicolon-/、-separated parts of a single line
    (unless the line is itself an option: some names contain commas)."""
    lines = [_strip_item(line) for line in text.splitlines()]
    lines = [line for line in lines if line]
    if len(lines) == 1 and matcher.exact(lines[0]) is None:
        return [part for part in (_strip_item(p) for p in _ITEM_SPLIT.split(lines[0])) if part]
    return lines


def _json_items(loaded: Any, names: tuple[str, ...]) -> list[Any] | None:
    if isinstance(loaded, list):
        return loaded
    if isinstance(loaded, dict):
        for name in names:
            value = loaded.get(name)
            if isinstance(value, list):
                return value
            if isinstance(value, str):
                return [value]
    return None


def parse_ddx(
    text: str, options: dict[str, str], *, raw: str | None = None
) -> tuple[list[RankedDiagnosis], list[str]]:
    """A ranked differential of up to 10 option texts from JSON ({"diagnoses": [...]} or a list, items
    strings or {"name", "probability"}) or from a numbered / comma-separated list. Each item must name an
    option exactly or case-insensitively (a trailing probability or parenthetical is allowed); other items
    are dropped and returned. Order is kept; repeats are ignored. No valid item raises `AnswerParseError`."""
    raw = text if raw is None else raw
    matcher = OptionMatcher(options)
    loaded = _json_items(_load_json(text), ("diagnoses", "ddx", "differential", "answers"))
    pairs: list[tuple[str, float | None]] = []
    if loaded is not None:
        for entry in loaded:
            if isinstance(entry, dict):
                name = entry.get("name") or entry.get("diagnosis") or entry.get("disease")
                prob = entry.get("probability")
                pairs.append((str(name or ""), float(prob) if isinstance(prob, int | float) else None))
            else:
                pairs.append((str(entry), None))
    else:
        pairs = [(item, _probability(item)) for item in _items(text, matcher)]

    ranked: dict[str, RankedDiagnosis] = {}
    dropped: list[str] = []
    for item, prob in pairs:
        key = next((k for v in _variants(item) if (k := matcher.exact(v))), None)
        if key is None:
            dropped.append(item)
        elif key not in ranked and len(ranked) < DDX_SIZE:
            valid = prob if prob is not None and 0.0 <= prob <= 1.0 else None
            ranked[key] = RankedDiagnosis(name=options[key], probability=valid)
    if not ranked:
        raise AnswerParseError(f"no item of the differential names one of the {len(options)} options", raw)
    return list(ranked.values()), dropped


_CONJUNCTION = re.compile(r"\s+(?:and|et|&)\s+|和|及|与|以及", re.IGNORECASE)


def parse_selection(
    text: str, options: dict[str, str], *, raw: str | None = None
) -> tuple[list[str], list[str]]:
    """The option keys a multi-select or treatment reply chooses, in order, and the items that named no
    option. Reads JSON ({"answers": [...]} or a list) or a list delimited by "、", "，", ",", ";" or
    newlines; an item that is not an option itself is split on "and" / "和", then searched for option texts
    it mentions ("建议加用蒙脱石" → 蒙脱石). No valid item raises `AnswerParseError`."""
    raw = text if raw is None else raw
    matcher = OptionMatcher(options)
    loaded = _json_items(_load_json(text), ("answers", "answer", "drugs", "choices"))
    if loaded is not None:
        items = [str(entry) for entry in loaded]
    else:
        # Every delimiter splits, whether the list is one line or many, except in a line that is an option.
        lines = [_strip_item(line) for line in text.splitlines()]
        items = [p for line in lines for p in ([line] if matcher.exact(line) else _ITEM_SPLIT.split(line))]
    chosen: list[str] = []
    dropped: list[str] = []
    for item in (i for i in (_strip_item(x) for x in items) if i):
        keys = _select_item(item, matcher)
        if keys:
            chosen.extend(k for k in keys if k not in chosen)
        else:
            dropped.append(item)
    if not chosen:
        raise AnswerParseError(f"the reply selects none of the {len(options)} options", raw)
    return chosen, dropped


def _select_item(item: str, matcher: OptionMatcher) -> list[str]:
    key = next((k for v in _variants(item) if (k := matcher.exact(v))), None)
    if key is not None:
        return [key]
    keys: list[str] = []
    for part in (p for p in (_strip_item(x) for x in _CONJUNCTION.split(item)) if p):
        exact = next((k for v in _variants(part) if (k := matcher.exact(v))), None)
        keys.extend([exact] if exact else matcher.mentions(part))
    return list(dict.fromkeys(keys))


def parse_choice(text: str, options: dict[str, str]) -> str:
    """The option key a free-text answer commits to. Tries, in order: a JSON `{"answer": ...}`, an explicit
    "answer is X", a reply that starts with a key, exactly one key marked like "X." or "(X)" in the text, and
    exactly one option text quoted in full. Anything else raises `AnswerParseError`."""
    keys = list(options)
    key_pattern = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    stripped = text.strip()

    try:
        answer = json.loads(stripped).get("answer")
        if isinstance(answer, str) and answer.strip() in options:
            return answer.strip()
    except (json.JSONDecodeError, AttributeError):
        pass

    # Only the phrase is case-insensitive: in "the answer is a beta-lactam" the "a" is not option A.
    explicit_keys = set(re.findall(rf"(?i:answer\s*(?:is|:)\s*(?:option\s*)?)\(?({key_pattern})\b", stripped))
    if len(explicit_keys) == 1:
        return explicit_keys.pop()

    leading = re.match(rf"^\(?({key_pattern})(?:[.):\s]|$)", stripped)
    if leading:
        return leading.group(1)

    marked = set(re.findall(rf"(?:^|\s)\(?({key_pattern})[.)]", stripped))
    if len(marked) == 1:
        return marked.pop()

    lowered = stripped.lower()
    quoted = [key for key, option in options.items() if option.lower() in lowered]
    if len(quoted) == 1:
        return quoted[0]

    raise AnswerParseError(f"the answer does not commit to exactly one of the options {keys}", text)
