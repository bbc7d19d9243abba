"""Named extension points: methods, datasets, knowledge sources, graph importers, model backends.

Each kind of extension has one `Registry`. A module that defines an extension registers it when it is
imported (`REGISTRY.register(name, item)`, or `@REGISTRY.register(name)` on a function or class). The first
time a registry is asked for anything it imports every module of its packages and the modules that installed
distributions name under its entry-point group (`[project.entry-points."clinrag.methods"]`), so adding an
extension is adding one file — in clinrag, or in a package of your own.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Generic, TypeVar, overload

from clinrag.core.errors import ConfigError, InvalidInputError

T = TypeVar("T")


class Registry(Generic[T]):
    """Extensions of one kind by name; `kind` names them in error messages ("method", "dataset")."""

    def __init__(
        self, kind: str, *, packages: Sequence[str] = (), entry_point_group: str | None = None
    ) -> None:
        self.kind = kind
        self.packages = tuple(packages)
        self.entry_point_group = entry_point_group
        self._items: dict[str, T] = {}
        self._discovered = False
        self._lock = threading.RLock()

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...
    @overload
    def register(self, name: str, item: T) -> T: ...

    def register(self, name: str, item: T | None = None) -> T | Callable[[T], T]:
        """Register `item` under `name` (or, without an item, return a decorator that does). A name taken by
        another item is a `ConfigError`: two extensions must not silently replace each other."""

        def add(value: T) -> T:
            with self._lock:
                present = self._items.get(name)
                if present is not None and present is not value:
                    raise ConfigError(f"two {self.kind}s are registered as {name!r}")
                self._items[name] = value
            return value

        return add if item is None else add(item)

    def get(self, name: str) -> T:
        items = self.items()
        if name not in items:
            raise InvalidInputError(
                f"unknown {self.kind} {name!r}; valid {self.kind}s: {', '.join(sorted(items))}"
            )
        return items[name]

    def configured(self, setting: str, name: str) -> T:
        """The item the setting `setting` names. Checked here, where the item is used, rather than when the
        settings load, so that loading them imports no extension; an unknown name is a `ConfigError` that
        names the setting and the known names."""
        items = self.items()
        if name not in items:
            raise ConfigError(
                f"{setting}: unknown {self.kind} {name!r}; known {self.kind}s: {', '.join(sorted(items))}"
            )
        return items[name]

    def names(self) -> list[str]:
        return sorted(self.items())

    def items(self) -> dict[str, T]:
        self._discover()
        with self._lock:
            return dict(self._items)

    def _discover(self) -> None:
        with self._lock:
            if self._discovered:
                return
            # Set first: a module imported below may itself look something up in this registry.
            self._discovered = True
            for package in self.packages:
                for module in _submodules(package):
                    importlib.import_module(module)
            if self.entry_point_group:
                for point in entry_points(group=self.entry_point_group):
                    point.load()


def _submodules(package: str) -> list[str]:
    """Every module below `package` (recursively), in a stable order."""
    root = importlib.import_module(package)
    names = [info.name for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}.")]
    return sorted(names)
