"""Config keys and wire fields as Markdown tables, read from the pydantic models (and
dataclasses) that declare them.

A field's words come from its declaration: `Field(description=...)` when it has one, else the
docstring written under the attribute. So a model built from other declarations (with
descriptions) documents itself the same way as one written out by hand.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import json
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

Dialect = Literal["toml", "json"]
_MIB = 1024**2
_UNITS = ((1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"))


@dataclass(frozen=True)
class FieldDoc:
    """One field as the reference shows it."""

    name: str
    annotation: Any
    default: Any
    """The default value; `PydanticUndefined` when the field is required."""
    factory: Callable[[], Any] | None
    constraints: tuple[str, ...]
    description: str


def field_docs(model: type) -> list[FieldDoc]:
    """The fields of a pydantic model or a (pydantic) dataclass, in declaration order."""
    docstrings = attribute_docstrings(model)
    if isinstance(model, type) and issubclass(model, BaseModel):
        infos: Mapping[str, FieldInfo] = model.model_fields
        return [_from_info(name, info, docstrings) for name, info in infos.items()]
    if dataclasses.is_dataclass(model):
        hints = typing.get_type_hints(model, include_extras=True)
        return [
            _from_dataclass_field(item, hints[item.name], docstrings)
            for item in dataclasses.fields(model)
        ]
    raise TypeError(f"{model!r} is neither a pydantic model nor a dataclass")


def attribute_docstrings(model: type) -> dict[str, str]:
    """The docstring under each attribute of `model` and its bases (the nearest wins)."""
    found: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if klass.__module__ in ("builtins", "pydantic.main"):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        tree = ast.parse(source)
        body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
        for statement, following in itertools.pairwise(body):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                found[statement.target.id] = inspect.cleandoc(following.value.value)
    return found


def _from_info(name: str, info: FieldInfo, docstrings: Mapping[str, str]) -> FieldDoc:
    factory = info.default_factory
    return FieldDoc(
        name=info.alias or name,
        annotation=info.annotation,
        default=info.default,
        factory=factory if callable(factory) else None,  # type: ignore[arg-type]
        constraints=tuple(_constraints(info.metadata)),
        description=info.description or docstrings.get(name, ""),
    )


def _from_dataclass_field(
    item: dataclasses.Field[Any], annotation: Any, docstrings: Mapping[str, str]
) -> FieldDoc:
    metadata: list[Any] = []
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *more = typing.get_args(annotation)
        metadata.extend(more)
    default = PydanticUndefined if item.default is dataclasses.MISSING else item.default
    factory = None if item.default_factory is dataclasses.MISSING else item.default_factory
    return FieldDoc(
        name=item.name,
        annotation=annotation,
        default=default,
        factory=factory,
        constraints=tuple(_constraints(metadata)),
        description=docstrings.get(item.name, ""),
    )


def _constraints(metadata: Sequence[Any]) -> Iterator[str]:
    for item in metadata:
        if isinstance(item, FieldInfo):
            yield from _constraints(item.metadata)
        elif isinstance(item, annotated_types.Gt):
            yield f"> {item.gt}"
        elif isinstance(item, annotated_types.Ge):
            yield f"≥ {_number(item.ge)}"
        elif isinstance(item, annotated_types.Lt):
            yield f"< {item.lt}"
        elif isinstance(item, annotated_types.Le):
            yield f"≤ {_number(item.le)}"
        elif isinstance(item, annotated_types.MinLen):
            yield f"at least {item.min_length} long"
        elif isinstance(item, annotated_types.MaxLen):
            yield f"at most {item.max_length} long"
        elif getattr(item, "pattern", None):
            yield f"matches `{item.pattern}`"


def _number(value: object) -> str:
    if isinstance(value, int) and value >= _MIB and value % _MIB == 0:
        for size, unit in _UNITS:
            if value % size == 0:
                return f"{value // size} {unit}"
    return str(value)


def nested_models(annotation: Any) -> list[type]:
    """The models (and dataclasses) a field's type holds, outermost first."""
    if _is_model(annotation):
        return [annotation]
    found: list[type] = []
    for argument in typing.get_args(annotation):
        for model in nested_models(argument):
            if model not in found:
                found.append(model)
    return found


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and (
        issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation)
    )


def type_text(annotation: Any, dialect: Dialect) -> str:
    """A field's type in words: `integer`, `list of string`, `"local" or "sandbox"`…"""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(arguments[0], dialect)
    if origin in (typing.Union, types.UnionType):
        names = [type_text(item, dialect) for item in arguments if item is not type(None)]
        optional = len(names) < len(arguments) and dialect == "json"
        return " or ".join([*names, "null"] if optional else names)
    if origin is Literal:
        return " or ".join(f"`{json.dumps(value)}`" for value in arguments)
    if origin in (list, tuple, set, frozenset, Sequence):
        items = [item for item in arguments if item is not Ellipsis]
        return "list" if not items else f"list of {type_text(items[0], dialect)}"
    if origin in (dict, Mapping):
        container = "table" if dialect == "toml" else "object"
        return f"{container} of {type_text(arguments[1], dialect)}" if arguments else container
    if annotation is Any:
        return "any"
    if _is_model(annotation):
        if dialect == "toml":
            return "table"
        return f"object ([`{annotation.__name__}`](#{anchor(annotation)}))"
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "path"
    return _SCALARS.get(annotation, getattr(annotation, "__name__", str(annotation)))


_SCALARS: dict[Any, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    type(None): "null",
}


def own_doc(model: type) -> str:
    """A class's own docstring, cleaned (never one it inherits, such as pydantic's)."""
    doc = model.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def anchor(model: type) -> str:
    """The id of a model's table on its page."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", model.__name__).lower().strip("_-")


def default_text(doc: FieldDoc, dialect: Dialect) -> str:
    """A field's default as the reader would write it, or why there is none."""
    if doc.factory is not None:
        try:
            value = doc.factory()
        except TypeError:
            value = PydanticUndefined
        if value is PydanticUndefined or not _plain_default(value):
            first = (inspect.getdoc(doc.factory) or "computed when it is read").split("\n\n")[0]
            return markdown_text(" ".join(first.split()))
        return _value_text(value, dialect)
    if doc.default is PydanticUndefined:
        return "required"
    return _value_text(doc.default, dialect)


def _plain_default(value: Any) -> bool:
    return isinstance(value, BaseModel | list | tuple | dict | set | frozenset) or (
        dataclasses.is_dataclass(value)
    )


def _value_text(value: Any, dialect: Dialect) -> str:
    if value is None:
        return "unset" if dialect == "toml" else "`null`"
    if isinstance(value, BaseModel) or dataclasses.is_dataclass(value):
        return "its table's defaults" if dialect == "toml" else "its fields' defaults"
    if isinstance(value, list | tuple | set | frozenset):
        return "`[]`" if not value else f"`{json.dumps(list(value))}`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{json.dumps(value)}`"
    if isinstance(value, bool):
        return f"`{json.dumps(value)}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, int):
        readable = _number(value)
        return f"`{value}`" if readable == str(value) else f"`{value}` ({readable})"
    if isinstance(value, PurePath):
        return f"`{json.dumps(str(value))}`"
    return f"`{json.dumps(value)}`"


def markdown_text(text: str) -> str:
    """Prose for a table cell: on one line, Markdown's special characters escaped outside
    code spans (which keep theirs), and no `|` that would end the cell."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    escaped = []
    for index, part in enumerate(parts):
        if index % 2:
            escaped.append(part.replace("|", "\\|"))
        else:
            part = part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            escaped.append(re.sub(r"([\\*_\[\]|])", r"\\\1", part))
    return "".join(escaped)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(model: type, dialect: Dialect) -> list[str]:
    header = "key" if dialect == "toml" else "field"
    lines = [_row([header, "type", "default", "what it is"]), _row(["---"] * 4)]
    for doc in field_docs(model):
        kind = type_text(doc.annotation, dialect)
        if doc.constraints:
            kind += ", " + ", ".join(doc.constraints)
        lines.append(
            _row(
                [
                    f"`{doc.name}`",
                    kind,
                    default_text(doc, dialect),
                    markdown_text(doc.description) or "—",
                ]
            )
        )
    return lines


def config_reference(model: type, level: int = 3) -> str:
    """Every key of a TOML file declared by `model`: its top-level keys, then one section per
    table (`[serve]`, `[limits]`…) with that table's keys."""
    lines = _table(model, "toml")
    for doc in field_docs(model):
        for nested in nested_models(doc.annotation):
            lines += [
                "",
                f"{'#' * level} The `[{doc.name}]` table",
                "",
                markdown_text(own_doc(nested)),
                "",
                *_table(nested, "toml"),
            ]
    return "\n".join(lines) + "\n"


def wire_reference(model: type, seen: set[type] | None = None) -> str:
    """A wire model's fields, then those of every model it holds (each once per page)."""
    seen = set() if seen is None else seen
    todo = [model]
    blocks: list[str] = []
    while todo:
        current = todo.pop(0)
        if current in seen:
            continue
        seen.add(current)
        summary = own_doc(current).split("\n\n")[0]
        blocks += [
            f'<a id="{anchor(current)}"></a>**`{current.__name__}`**'
            + (f": {markdown_text(summary)}" if summary else ""),
            "",
            *_table(current, "json"),
            "",
        ]
        for doc in field_docs(current):
            todo += [nested for nested in nested_models(doc.annotation) if nested not in seen]
    return "\n".join(blocks)
