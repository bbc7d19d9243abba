"""Methods by name. Each module that defines a method registers a `MethodSpec` here; the CLI, the
evaluation runner and the HTTP API look methods up through `get_method`."""

from __future__ import annotations

from clinrag.core.errors import InvalidInputError
from clinrag.methods.base import MethodSpec


def _specs() -> dict[str, MethodSpec]:
    # Imported here, not at module level: method modules import heavy components, and this keeps
    # `--help` and name validation fast.
    from clinrag.methods import cot, deepdoctor, direct, doctorrag, graph_infer, imedrag, knn_vote, rag
    from clinrag.methods.meddx import experience as meddx_experience
    from clinrag.methods.meddx import method as meddx

    specs = (
        direct.SPEC,
        cot.SPEC,
        rag.SPEC,
        imedrag.SPEC,
        doctorrag.SPEC,
        deepdoctor.SPEC,
        graph_infer.SPEC,
        knn_vote.SPEC,
        meddx.SPEC,
        meddx_experience.SPEC,
    )
    return {spec.name: spec for spec in specs}


def method_names() -> list[str]:
    return sorted(_specs())


def get_method(name: str) -> MethodSpec:
    specs = _specs()
    if name not in specs:
        raise InvalidInputError(f"unknown method {name!r}; valid methods: {', '.join(sorted(specs))}")
    return specs[name]
