"""Named parameter sets of a method (`preset=paper`): data files, one per method
(`presets/<method>.jsonl`), each line one parameter of one set with the place its value comes from:

    {"preset": "paper", "parameter": "k_patients", "value": 15, "source": "ExpRAG (Ou et al., 2025), §4.1"}

A set gives the method's parameters their values before the user's own: a parameter the user names keeps
the user's value, so the paper's setting and a change to it are one switch apart."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import srsly

from clinrag.core.errors import DataFormatError, InvalidInputError

PRESETS = Path(__file__).parent / "presets"


@dataclass(frozen=True)
class PresetValue:
    parameter: str
    value: Any
    source: str  # the paper's section, table, algorithm or equation that states it


@cache
def presets(method: str, folder: Path = PRESETS) -> dict[str, tuple[PresetValue, ...]]:
    """The parameter sets of `method` by name (none when it has no file)."""
    path = folder / f"{method}.jsonl"
    if not path.is_file():
        return {}
    found: dict[str, list[PresetValue]] = {}
    try:
        for record in srsly.read_jsonl(path):
            value = PresetValue(record["parameter"], record["value"], record["source"])
            found.setdefault(record["preset"], []).append(value)
    except (ValueError, KeyError, TypeError) as exc:
        raise DataFormatError(f"{path}: malformed parameter set ({exc!r})") from exc
    return {name: tuple(values) for name, values in found.items()}


def preset_values(method: str, name: str, parameters: set[str], folder: Path = PRESETS) -> dict[str, Any]:
    """The values the set `name` of `method` gives its parameters (`parameters`: the method's own names)."""
    known = presets(method, folder)
    if name not in known:
        offered = ", ".join(sorted(known)) or "none"
        raise InvalidInputError(f"{method} has no parameter set {name!r} (its sets: {offered})")
    values = {value.parameter: value.value for value in known[name]}
    if unknown := sorted(set(values) - parameters):
        raise DataFormatError(f"the {name} set of {method} names parameters it does not have: {unknown}")
    return values
