"""The package's shape, read from its source: no import circle, arrows pointing down the layers (README
"Layout"), settings loaded only by the application, and one answering kernel."""

from __future__ import annotations

import ast
from pathlib import Path

import clinrag

ROOT = Path(clinrag.__file__).parent
# The layers in the README's order, lowest first: a module imports from its own layer and those before it.
LAYERS = (
    "core",
    "llm",
    "embed",
    "index",
    "terms",
    "conditions",
    "knowledge",
    "patients",
    "graph",
    "literature",
    "tasks",
    "consult",
    "methods",
    "eval",
    "scale",
    "app",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in ROOT.rglob("*.py")}


def resolve(name: str) -> str | None:
    """The clinrag module an import names (`from clinrag.x import y` may name module x or x.y)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(path: Path, *, typing: bool) -> set[str]:
    """Every clinrag module the file imports, wherever the import statement stands; those under
    `if TYPE_CHECKING:` (never run, so no circle) only with `typing`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
        for node in ast.walk(branch)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only and not typing:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {target for name in names if name.startswith("clinrag") and (target := resolve(name))}
    return found - {module_name(path)}


GRAPH = {name: imports(path, typing=False) for name, path in MODULES.items()}  # what runs
# What the code depends on, its type annotations included: a layer's types belong to it or to those below.
DEPENDENCIES = {name: imports(path, typing=True) for name, path in MODULES.items()}


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    return found


def layer(module: str) -> int:
    if module == "clinrag":  # the package itself: its version
        return 0
    if module == "clinrag.__main__":  # `python -m clinrag`: the application's entry point
        return LAYERS.index("app")
    return LAYERS.index(module.split(".")[1])


def test_no_import_cycles() -> None:
    assert cycles() == []


def test_every_package_has_a_layer() -> None:
    packages = {name.split(".")[1] for name in MODULES if name.count(".") and name != "clinrag.__main__"}
    assert packages == set(LAYERS)


def test_arrows_point_down_the_layers() -> None:
    upward = sorted(
        (module, target)
        for module, targets in DEPENDENCIES.items()
        for target in targets
        if layer(target) > layer(module)
    )
    assert upward == []
    assert any(DEPENDENCIES[name] - GRAPH[name] for name in MODULES)  # the check sees type-only imports


def test_only_the_application_loads_settings() -> None:
    callers = sorted(
        name
        for name, path in MODULES.items()
        if "load_settings(" in path.read_text(encoding="utf-8")
        and not name.startswith("clinrag.app")
        and name != "clinrag.core.settings"
    )
    assert callers == []


def test_one_answering_kernel() -> None:
    sources = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
    assert [name for name, text in sources.items() if "\nDDX_SIZE = " in text] == ["clinrag.core.models"]
    assert [name for name, text in sources.items() if "asyncio.run(self.aanswer" in text] == []
    hand_written = sorted(name for name, text in sources.items() if "usage += " in text)
    # The kernel; components with a ledger of their own (the graph planner, the triple extractor, the
    # Med-TextGrad run) whose total a method adds once; the simulated patient (not the method's calls).
    assert hand_written == [
        "clinrag.graph.planner",
        "clinrag.graph.triples",
        "clinrag.methods.answering",
        "clinrag.methods.consult_prose",
        "clinrag.methods.deepdoctor",
        "clinrag.methods.doctorrag",
        "clinrag.methods.meddx.llm_patient",
    ]
