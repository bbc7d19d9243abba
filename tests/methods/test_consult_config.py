"""Each default of the consultation is written in one place: `ConsultConfig`'s fields that configure a part of
the engine read their defaults from that part's settings (the consultant's, the differential's, the
triage's, the extractor's constants), never a number of their own, and each part's settings agree."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest

from clinrag.consult.reason.differential import LikelihoodSettings
from clinrag.consult.reason.triage import TriageSettings
from clinrag.consult.settings import ConsultantSettings
from clinrag.consult.understand.meaning import NEGATION_MARGIN, SEMANTIC_THRESHOLD
from clinrag.core.errors import InvalidInputError
from clinrag.methods import consult as consult_module
from clinrag.methods.consult import ConsultConfig

PARTS = (ConsultantSettings, LikelihoodSettings, TriageSettings)
# the method's own fields: what knowledge and patients it reads and who writes the answer
METHOD_ONLY = {"preset", "sources", "chinese_sources", "patients", "kb", "prose", "refine_iterations"}
METHOD_ONLY |= {"unsupported", "reads"}


def _written_defaults() -> dict[str, ast.expr]:
    """Field name → the expression its default is written as in ConsultConfig's source."""
    tree = ast.parse(inspect.getsource(consult_module))
    config = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ConsultConfig")
    written = {}
    for statement in config.body:
        if isinstance(statement, ast.AnnAssign) and statement.value is not None:
            value = statement.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "Field":
                value = next(k.value for k in value.keywords if k.arg == "default")
            written[statement.target.id] = value
    return written


def test_every_engine_default_is_read_from_its_part() -> None:
    owners = {f.name: part for part in PARTS for f in dataclasses.fields(part)}
    owners |= {"meaning_threshold": SEMANTIC_THRESHOLD, "negation_margin": NEGATION_MARGIN}
    written = _written_defaults()
    engine_fields = set(ConsultConfig.model_fields) - METHOD_ONLY
    assert engine_fields and engine_fields <= set(owners), sorted(engine_fields - set(owners))
    for name in sorted(engine_fields):
        owner = owners[name]
        expected = owner if isinstance(owner, float) else getattr(owner(), name)
        assert ConsultConfig.model_fields[name].default == expected, name
        # read from the part (`_LIKELY.typical`, `SEMANTIC_THRESHOLD`), not a number written again
        assert not isinstance(written[name], ast.Constant), f"{name} writes its default again"


def test_the_parts_write_no_default_of_another() -> None:
    names = [f.name for part in PARTS for f in dataclasses.fields(part)]
    assert len(names) == len(set(names))


def test_infinity_and_nan_are_no_parameter_value() -> None:
    for value in (float("inf"), float("-inf"), float("nan")):
        with pytest.raises(InvalidInputError, match="finite number"):
            ConsultConfig.from_params({"spectrum": value})


def test_sources_spelled_differently_are_one_configuration() -> None:
    """A source named twice or with spaces is the same knowledge: the same configuration, so no second
    compilation (#53: k spellings of the same sources compiled k folders)."""
    spellings = [
        "packaged:faker-diseases",
        "packaged:faker-diseases,packaged:faker-diseases",
        " packaged:faker-diseases , packaged:faker-diseases,",
    ]
    configs = {ConsultConfig.from_params({"sources": spelling}) for spelling in spellings}
    assert len(configs) == 1 and configs.pop().source_specs() == ["packaged:faker-diseases"]
