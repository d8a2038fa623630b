"""An expression tree → a value: a JSON literal, a zod reference, or a `_Schema`.

`_Evaluator.eval(node)` evaluates what `_parser.py` produced. Literals evaluate to themselves
(arrays and objects are `register`ed to know their size), identifiers to the constants defined
earlier in the file (`env`, filled by `_module.py`), and member/call chains step by step
(`eval_chain`): `z.string` is a `_ZodRef`; calling a `_ZodRef` runs a factory
(`_factories.py`); calling a method on a `_Schema` runs a method (`_methods.py`) after checking
that the schema's kind has it. Every schema built is checked against `MAX_NESTING` and
`MAX_SCHEMA_NODES` (`checked`).
"""

from __future__ import annotations

from typing import Any

from ._arguments import _Arguments
from ._errors import MAX_NESTING, MAX_SCHEMA_NODES
from ._factories import _FACTORIES, _SUPPORTED_FACTORIES
from ._methods import _apply_method, _methods_for
from ._parser import _Node
from ._schema import _kind_label, _Schema
from ._values import _describe_value, _ZodRef


class _Evaluator(_Arguments):
    def __init__(self, file: str):
        super().__init__(file)
        self.env: dict[str, Any] = {}  # constants (and zod bindings) declared so far
        self.zod_imported = False

    def eval(self, node: _Node) -> Any:
        kind = node.kind
        if kind == "lit":
            return node.value
        if kind == "ident":
            return self.lookup(node.value, node.line)
        if kind == "regex":
            return node.value
        if kind == "bad":
            construct, why = node.value
            raise self.unsupported(construct, node.line, why)
        if kind == "array":
            return self.register([self.eval(item) for item in node.items], node.line)
        if kind == "object":
            out: dict[str, Any] = {}
            for key, item in node.items:
                value = self.eval(item)
                if key is not None:  # pragma: no branch - keyless entries are bad nodes
                    out[key] = value
            return self.register(out, node.line)
        return self.eval_chain(node)

    def lookup(self, name: str, line: int) -> Any:
        if name in self.env:
            return self.env[name]
        if name in ("z", "zod") and not self.zod_imported:
            raise self.fail(
                f'unknown identifier "{name}": import zod first (import {{ z }} from "zod")',
                line,
                name,
            )
        raise self.fail(
            f'unknown identifier "{name}" (only zod and constants defined earlier in this file '
            "can be used)",
            line,
            name,
        )

    def eval_chain(self, node: _Node) -> Any:
        ops: list[_Node] = []
        base = node
        while base.kind in ("member", "call"):
            ops.append(base)
            assert base.obj is not None
            base = base.obj
        ops.reverse()
        if ops[0].kind == "call" and base.kind == "ident" and base.value not in self.env:
            if base.value in ("z", "zod"):
                self.lookup(base.value, base.line)
            raise self.unsupported(
                f"{base.value}(...)",
                base.line,
                f'"{base.value}" is not a zod function or a constant of this file',
            )
        value = self.eval(base)
        index = 0
        while index < len(ops):
            op = ops[index]
            if op.kind == "member" and index + 1 < len(ops) and ops[index + 1].kind == "call":
                value = self.call_method(value, op.value, ops[index + 1].items, op.line)
                index += 2
                continue
            if op.kind == "member":
                value = self.get_property(value, op.value, op.line)
            else:
                if not isinstance(value, _ZodRef):
                    callee = base.value if base.kind == "ident" and index == 0 else "(...)"
                    raise self.unsupported(
                        f"{callee}(...)", op.line, f"{_describe_value(value)} cannot be called"
                    )
                value = self.call_factory(value, op.items, op.line)
            index += 1
        return value

    def get_property(self, value: Any, name: str, line: int) -> Any:
        if isinstance(value, _ZodRef):
            return value.child(name)
        if (
            isinstance(value, _Schema)
            and name == "shape"
            and value.kind == "object"
            and not value.wrapped
        ):
            return self.register(dict(zip(value.keys, value.children, strict=True)), line)
        raise self.unsupported(
            f".{name}", line, f"properties of {_describe_value(value)} are not supported"
        )

    def call_method(self, value: Any, name: str, arg_nodes: tuple, line: int) -> Any:
        if isinstance(value, _ZodRef):
            return self.call_factory(value.child(name), arg_nodes, line)
        construct = f".{name}(...)"
        if not isinstance(value, _Schema):
            raise self.unsupported(
                construct, line, f"it is called on {_describe_value(value)}, not on a zod schema"
            )
        allowed = _methods_for(value)
        if name not in allowed:
            raise self.unsupported(
                construct,
                line,
                f"supported on {_kind_label(value)} schema: "
                + ", ".join(f".{m}()" for m in allowed),
            )
        args = [self.eval(a) for a in arg_nodes]
        result = _apply_method(self, value, name, args, line, construct)
        return self.checked(result, line)

    def call_factory(self, ref: _ZodRef, arg_nodes: tuple, line: int) -> Any:
        handler = _FACTORIES.get(ref.path)
        construct = f"{ref.display}(...)"
        if handler is None:
            raise self.unsupported(construct, line, f"supported: {_SUPPORTED_FACTORIES}")
        args = [self.eval(a) for a in arg_nodes]
        result = handler(self, ref.path, args, line, construct)
        return self.checked(result, line)

    def checked(self, schema: _Schema, line: int) -> _Schema:
        if schema.depth > MAX_NESTING:
            raise self.fail(
                f"the schema is nested too deeply (more than {MAX_NESTING} levels)",
                line,
                "nesting",
            )
        if schema.size > MAX_SCHEMA_NODES:
            raise self.fail(
                f"the schema is too large once inlined (more than {MAX_SCHEMA_NODES} nodes)",
                line,
                "size",
            )
        return schema
