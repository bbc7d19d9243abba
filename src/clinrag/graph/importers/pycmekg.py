"""PyCMeKG (Chinese medical knowledge graph) triples from a pickle file, loaded without running its code.

A pickle can name any importable callable and have it called while loading (`os.system`, …). The loader
here refuses every class and global, so only what pickle builds itself — dicts, lists, tuples, sets, strings,
numbers — can load; anything else raises `UnsafePickleError` before it runs.

Accepted shapes (no PyCMeKG file was available to check the exact layout, so the common ones are read):
a list of (head, relation, tail) triples, or a dict head → {relation: [tails]} or head → [(relation, tail)].
Relation names are the schema's or the usual Chinese ones (症状, 检查, 药物, 治疗, 并发症, …); others are
skipped and counted.
"""

from __future__ import annotations

import hashlib
import io
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from clinrag.core.errors import DataFormatError
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords, SourceTraits, clean_name
from clinrag.graph.importers.registry import PATH, GraphSource, register
from clinrag.graph.schema import Relation

NAME = "pycmekg"
UNKNOWN_RELATION = "relations the schema has no type for"
MALFORMED = "entries that are not (head, relation, tail)"
NO_RELATION = "heads without a relation in the schema"
RELATION_NAMES: dict[str, Relation] = {
    **{relation.value.casefold(): relation for relation in Relation},
    **dict.fromkeys(("症状", "临床表现", "典型症状"), Relation.HAS_SYMPTOM),
    **dict.fromkeys(("检查", "检查方式", "辅助检查", "实验室检查", "影像学检查"), Relation.RECOMMEND_TEST),
    **dict.fromkeys(("药物", "常用药", "药物治疗", "推荐药品", "用药"), Relation.RECOMMEND_DRUG),
    **dict.fromkeys(("治疗", "治疗方式", "手术治疗", "其他治疗", "治疗方法"), Relation.RECOMMEND_CURE),
    **dict.fromkeys(("并发症", "合并症", "伴随疾病"), Relation.HAS_COMORBIDITY),
}


class UnsafePickleError(DataFormatError):
    """A pickle asked to load a class or call a function; refused, nothing of it was run."""


class _BuiltinsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> NoReturn:
        raise UnsafePickleError(
            f"refused to load {module}.{name} from a pickle: only plain containers, strings and numbers "
            "are accepted"
        )


def safe_load_pickle(data: bytes) -> Any:
    """Unpickle `data` allowing no class or global at all (raises `UnsafePickleError` on any)."""
    try:
        return _BuiltinsOnly(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        RecursionError,
    ) as exc:
        raise DataFormatError(f"not a readable pickle: {exc}") from exc


def _triples(data: Any) -> Iterator[tuple[Any, Any, Any] | None]:
    """(head, relation, tail) triples of the accepted shapes; None for an entry of no accepted shape."""
    if isinstance(data, dict):
        for head, value in data.items():
            if isinstance(value, dict):
                for relation, tails in value.items():
                    for tail in tails if isinstance(tails, list | tuple | set) else [tails]:
                        yield head, relation, tail
            elif isinstance(value, list | tuple):
                for pair in value:
                    yield (head, *pair) if isinstance(pair, list | tuple) and len(pair) == 2 else None
            else:
                yield None
    elif isinstance(data, list | tuple):
        for item in data:
            yield tuple(item) if isinstance(item, list | tuple) and len(item) == 3 else None
    else:
        kind = type(data).__name__
        raise DataFormatError(f"a PyCMeKG pickle holds a list of triples or a dict, not a {kind}")


def read_pycmekg(path: str | Path, *, limit: int | None = None) -> SourceRecords:
    """Disease records from a PyCMeKG pickle (at most `limit` diseases, in the file's order)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataFormatError(f"cannot read the PyCMeKG pickle {path}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()[:16]
    result = SourceRecords(NAME, f"{NAME}:{path}", f"{digest}:limit={limit}")
    by_head: dict[str, DiseaseRecord] = {}
    for index, triple in enumerate(_triples(safe_load_pickle(data))):
        head = clean_name(triple[0]) if triple is not None else None
        if triple is None or head is None:
            result.skips.add(MALFORMED, str(index))
            continue
        if head not in by_head:
            if limit is not None and len(by_head) >= limit:
                continue
            by_head[head] = DiseaseRecord(head, head)
            result.read += 1
        relation = RELATION_NAMES.get(str(triple[1]).strip().casefold())
        if relation is None:
            result.skips.add(f"{UNKNOWN_RELATION} ({str(triple[1])[:40]})", f"{head}")
            continue
        by_head[head].add(relation, triple[2], result.skips)
    for record in by_head.values():
        result.keep(record, NO_RELATION)
    return result


register(
    GraphSource(
        f"{NAME}:{PATH}",
        lambda path, limit: read_pycmekg(path, limit=limit),
        SourceTraits(lay=True, askable=True, title="PyCMeKG triples (the Chinese medical knowledge graph)"),
    )
)
