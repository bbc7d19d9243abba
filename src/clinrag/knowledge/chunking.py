"""Sentence-aware chunking of plain text for the knowledge base.

Size rule: a text's size is its number of *units*, where every Han or kana character (Chinese, Japanese),
CJK punctuation mark (，。) or full-width form is one unit and every other run of non-space characters (an
English word, a number, "100mg") is one unit. So English text is measured in words and Chinese text in
characters, and mixed text in both: "做过腹部CT，" is 4 + 1 + 1 = 6 units.

Sentences end at 。！？ (no space needed) or at . ! ? followed by whitespace and a character that is not a
lowercase letter (so "m. puborectalis" and "e.g. Aspirin" stay whole), closing quotes and brackets
included. A blank line ends a paragraph and therefore a sentence; a single line break inside a paragraph
is only wrapping: it becomes a space, or nothing between two CJK characters.

Chunks pack whole sentences up to `max_size` units; the next chunk repeats the last `overlap` sentences of
the previous one (fewer when they would not leave room for a new sentence). A sentence longer than
`max_size` is split on units, and its pieces are then treated as sentences. Chunks are slices of the
normalised text, so nothing is reworded and the output is deterministic."""

from __future__ import annotations

import re

from clinrag.core.errors import InvalidInputError

DEFAULT_MAX_SIZE = 120
DEFAULT_OVERLAP = 1

# Han, kana, CJK punctuation and full-width forms: each counts as one unit.
_CJK = "\u3001-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uffef"
_UNIT = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_WRAP_BETWEEN_CJK = re.compile(rf"(?<=[{_CJK}])\s*\n\s*(?=[{_CJK}])")
_SPACES = re.compile(r"\s+")
_CLOSERS = "\"'”’」』）)\\]"
_SENTENCE_END = re.compile(
    rf"[。！？]+[{_CLOSERS}]*"  # Chinese: ends without a following space
    rf"|[.!?]+[{_CLOSERS}]*(?=\s+[^\sa-z])"  # Latin: needs a space and no lowercase continuation
)
# Abbreviations that end in a period but rarely end a sentence (compared lowercased, period removed).
_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "vs", "al", "fig", "figs", "dr", "mr", "mrs", "ms", "cf", "approx", "ca"}
)

Span = tuple[int, int]


def text_size(text: str) -> int:
    """The size of `text` in units: words, with each CJK character counted as one."""
    return len(_UNIT.findall(text))


def normalize(text: str) -> str:
    """Paragraphs separated by one blank line, whitespace inside a paragraph collapsed (see module doc)."""
    paragraphs = _PARAGRAPH_BREAK.split(text.strip())
    cleaned = (_SPACES.sub(" ", _WRAP_BETWEEN_CJK.sub("", p)).strip() for p in paragraphs)
    return "\n\n".join(p for p in cleaned if p)


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, after normalisation."""
    normalized = normalize(text)
    return [normalized[start:end] for start, end in _sentence_spans(normalized)]


def chunk_text(text: str, max_size: int = DEFAULT_MAX_SIZE, overlap: int = DEFAULT_OVERLAP) -> list[str]:
    """Chunks of at most `max_size` units made of whole sentences, consecutive chunks sharing `overlap`
    sentences; an empty or whitespace-only text gives []."""
    if max_size < 1:
        raise InvalidInputError(f"max_size must be at least 1, got {max_size}")
    if overlap < 0:
        raise InvalidInputError(f"overlap must not be negative, got {overlap}")
    normalized = normalize(text)
    spans = [piece for span in _sentence_spans(normalized) for piece in _fit(normalized, span, max_size)]
    sizes = [text_size(normalized[start:end]) for start, end in spans]
    return [
        normalized[spans[first][0] : spans[last - 1][1]] for first, last in _pack(sizes, max_size, overlap)
    ]


def _sentence_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    for paragraph in re.finditer(r"[^\n]+", text):
        start = paragraph.start()
        for end in _sentence_ends(text, paragraph.start(), paragraph.end()):
            # skip the whitespace that separates this sentence from the previous one
            while start < end and text[start].isspace():
                start += 1
            if start < end:
                spans.append((start, end))
            start = end
    return spans


def _sentence_ends(text: str, start: int, end: int) -> list[int]:
    ends = [
        match.end()
        for match in _SENTENCE_END.finditer(text, start, end)
        if not _is_abbreviation(text[start : match.start() + 1])
    ]
    return [*ends, end] if not ends or ends[-1] != end else ends


def _is_abbreviation(before: str) -> bool:
    """True when `before` (text up to and including a period) ends with a known abbreviation."""
    if not before.endswith(".") or not before[:-1].split():
        return False
    word = before[:-1].split()[-1].lstrip("([{\"'").lower()
    return word in _ABBREVIATIONS


def _fit(text: str, span: Span, max_size: int) -> list[Span]:
    """The span itself, or consecutive pieces of at most `max_size` units when the sentence is too long."""
    units = [(m.start() + span[0], m.end() + span[0]) for m in _UNIT.finditer(text[span[0] : span[1]])]
    if len(units) <= max_size:
        return [span]
    return [
        (units[i][0], units[min(i + max_size, len(units)) - 1][1]) for i in range(0, len(units), max_size)
    ]


def _pack(sizes: list[int], max_size: int, overlap: int) -> list[Span]:
    """Greedy packing of sentence sizes into [first, last) index ranges; every size is <= max_size."""
    ranges: list[Span] = []
    first = 0
    while first < len(sizes):
        last, total = first, 0
        while last < len(sizes) and total + sizes[last] <= max_size:
            total += sizes[last]
            last += 1
        ranges.append((first, last))
        if last == len(sizes):
            break
        # repeat up to `overlap` sentences, but always move forward and leave room for the next sentence
        first = max(last - overlap, first + 1)
        while first < last and sum(sizes[first:last]) + sizes[last] > max_size:
            first += 1
    return ranges
