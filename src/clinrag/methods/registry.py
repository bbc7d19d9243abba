"""Methods by name. A module that defines a method registers its `MethodSpec` with `register` when it is
imported; every module of `clinrag.methods`, and of the packages that name one under the `clinrag.methods`
entry-point group, is imported on the first lookup. The CLI, the evaluation runner and the HTTP API find
methods only through here."""

from __future__ import annotations

from clinrag.core.registry import Registry
from clinrag.methods.base import MethodSpec

METHODS: Registry[MethodSpec] = Registry(
    "method", packages=["clinrag.methods"], entry_point_group="clinrag.methods"
)


def register(spec: MethodSpec) -> MethodSpec:
    return METHODS.register(spec.name, spec)


def method_names() -> list[str]:
    return METHODS.names()


def get_method(name: str) -> MethodSpec:
    return METHODS.get(name)
