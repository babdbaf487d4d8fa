"""How an option is declared, once, and what is derived from its declaration: a config
file's keys, a command line's flags, the fields a request may hold.

An `Option` says its key (the config file's; its flag's too unless it names others), its
`Kind` of value (what a file or a request holds, how a flag's text is read), its default,
its help, the `Place`s that may set it, and, for what a caller asks of a server, how it may
be narrowed (`Narrowing`). `logos.options.declarations` holds every option; the settings
(`logos.settings`), the fronts and `sandboxd mcp` derive from it.

WHY plain data and a few derivations rather than a framework: a reader sees an option whole
in one place, and each derived thing (a pydantic model, an argparse argument) is made by a
short function they can read.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, TypeVar, cast, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic_core import core_schema

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
M = TypeVar("M", bound=BaseModel)


class Place(enum.Enum):
    """Where an option may be set."""

    CONFIG_FILE = enum.auto()
    """logos's config file (`logos.settings.config_file`)."""
    COMMAND_LINE = enum.auto()
    """The `logos` command's flags."""
    SERVE_RUNNER = enum.auto()
    """A `logos serve` run request's `runner`."""
    SERVE_LIMITS = enum.auto()
    """A `logos serve` run request's `limits`."""
    PROJECT = enum.auto()
    """A project request: what the project grants its agents, at most."""
    AGENT_RUNNER = enum.auto()
    """A project agent request's `runner`."""
    AGENT_MODEL = enum.auto()
    """A project agent request's `model`."""
    TASK_TOOL = enum.auto()
    """The arguments of `logos mcp`'s task tool."""
    SANDBOXD_LAUNCH = enum.auto()
    """`sandboxd mcp`'s launch: its flags and its config file."""
    SANDBOXD_RUN = enum.auto()
    """The arguments of `sandboxd mcp`'s run tool."""

    @property
    def prefix(self) -> str:
        """Where its fields sit in a request (`limits.`), for a refusal to name a field as
        the caller wrote it; nothing for those at the top."""
        return _PREFIXES.get(self, "")


_PREFIXES = {
    Place.SERVE_RUNNER: "runner.",
    Place.SERVE_LIMITS: "limits.",
    Place.AGENT_RUNNER: "runner.",
    Place.AGENT_MODEL: "model.",
}


class Narrowing(enum.Enum):
    """How a caller may narrow what its server (a launch, a project) allows."""

    LOWER = "a number only lower"
    SUBSET = "a list only a subset"
    INSIDE = "a path only inside, and read-only stays read-only"
    OFF = "on only off"


FlagAction = Literal["store", "store_true", "toggle", "append", "optional"]
"""How a flag takes its value: `store` a value, `store_true` a switch, `toggle` a `--x` and
a `--no-x`, `append` one value per use, `optional` a value that may be left out."""


@dataclass(frozen=True)
class Kind(Generic[T_co]):
    """A kind of value: what a config file, a request or a tool argument holds, how a flag's
    text is read, and the words a refusal says it in."""

    annotation: Any
    """The pydantic type a config file holds."""
    words: str
    """The kind in words: "a whole number of at least 1"."""
    parse: Callable[[str], Any] | None = None
    """How a flag's text is read (an argparse.ArgumentTypeError says what is wrong); None:
    the text itself."""
    action: FlagAction = "store"
    wire: Any = None
    """The pydantic type a request holds, when it is not `annotation` (paths are objects on
    the wire, `PATH[:ro|:rw]` text in a file)."""
    on: Any = True
    off: Any = False
    """A toggle's values: what `--x` and `--no-x` give."""

    @property
    def request_type(self) -> Any:
        return self.annotation if self.wire is None else self.wire


@dataclass(frozen=True, eq=False)
class Option(Generic[T_co]):
    """One option, declared once (so one is equal only to itself)."""

    key: str
    """The config file's key, and the name `Values` and a flag's `dest` go by."""
    kind: Kind[T_co]
    help: str
    """What it does, for `--help`, a config file's reader, a request's schema and a tool's
    arguments (its default, when it has one, is said after it on the command line)."""
    places: tuple[Place, ...]
    default: T_co | None = None
    """What it is when nothing sets it (None: unset, whatever uses it decides)."""
    flags: tuple[str, ...] = ()
    """Its flags; by default `--KEY` (dashes for underscores) where a command line sets it."""
    field: str = ""
    """Its name in a request or a tool's arguments (by default its key)."""
    renamed: Mapping[Place, str] = dataclasses.field(default_factory=dict)
    """Where a place names it otherwise (`sandboxd mcp`'s run tool says `hosts`)."""
    narrowing: Narrowing | None = None
    """How a caller may narrow it; None: a caller cannot ask for it, or chooses it freely."""
    metavar: str | None = None
    negation: tuple[str, str] | None = None
    """`optional` flags: a second flag that sets it to False (`--no-sandbox`), and its help."""
    const: T_co | None = None
    """`optional` flags: the value of the flag given without one."""

    @property
    def name(self) -> str:
        """Its name in a request or a tool's arguments."""
        return self.field or self.key

    def name_at(self, place: Place) -> str:
        """Its name where `place` sets it."""
        return self.renamed.get(place, self.name)

    @property
    def flag_names(self) -> tuple[str, ...]:
        return self.flags or (f"--{self.key.replace('_', '-')}",)

    def described(self) -> str:
        """Its help, and its default when it has one: what `--help` and a file's keys say."""
        if self.default is None or isinstance(self.default, bool):
            return self.help
        shown = f"{self.default:g}" if isinstance(self.default, float) else self.default
        return f"{self.help} (default {shown})"


class Values:
    """Option values as one source gave them (a config file, a command line, a launch), by
    key; an option it did not give reads None."""

    def __init__(self, given: Mapping[str, object] | None = None) -> None:
        self._given = {key: value for key, value in (given or {}).items() if value is not None}

    @classmethod
    def of(cls, source: object, options: Iterable[Option[Any]]) -> Values:
        """The values of `options` that `source` (a parsed command line, a validated file)
        holds as attributes named by their keys."""
        return cls({option.key: getattr(source, option.key, None) for option in options})

    def __getitem__(self, option: Option[T]) -> T | None:
        return cast("T | None", self._given.get(option.key))

    def __repr__(self) -> str:
        return f"Values({self._given!r})"


# What is derived ----------------------------------------------------------------------------


def file_model(
    name: str,
    options: Iterable[Option[Any]],
    *,
    checks: Mapping[str, Any] | None = None,
    tables: Mapping[str, type[BaseModel]] | None = None,
) -> type[BaseModel]:
    """A config file's model: one optional key per option, unknown keys refused; `checks`
    add a pydantic validator to a key's type (a name a registry above the declarations
    knows), `tables` are models of their own (`[serve]`)."""
    fields: dict[str, Any] = {}
    for option in options:
        annotation = option.kind.annotation
        check = (checks or {}).get(option.key)
        if check is not None:
            annotation = Annotated[annotation, check]
        fields[option.key] = (annotation | None, Field(None, description=option.described()))
    for key, table in (tables or {}).items():
        fields[key] = (table, Field(default_factory=table))
    return create_model(name, __config__=ConfigDict(extra="forbid", frozen=True), **fields)


def add_flag(
    container: argparse._ActionsContainer,
    option: Option[Any],
    *,
    help: str | None = None,
    choices: Sequence[str] | None = None,
) -> None:
    """`option`'s flags in `container`; `help` and `choices` for a command that says more (or
    offers fewer) than the declaration. Not given, a flag reads None (a list: empty)."""
    kind = option.kind
    shown = option.described() if help is None else help
    names = option.flag_names
    if kind.action == "store_true":
        container.add_argument(
            *names, dest=option.key, action="store_true", default=None, help=shown
        )
    elif kind.action == "toggle":
        container.add_argument(
            *names, dest=option.key, action=_Toggle, on=kind.on, off=kind.off, help=shown
        )
    elif kind.action == "append":
        shown = f"{shown}; repeatable"
        container.add_argument(
            *names,
            dest=option.key,
            action="append",
            type=_text(kind),
            metavar=option.metavar,
            default=[],
            help=shown,
        )
    elif kind.action == "optional":
        container.add_argument(
            *names,
            dest=option.key,
            nargs="?",
            const=option.const,
            metavar=option.metavar,
            help=shown,
        )
        if option.negation is not None:
            negation, negation_help = option.negation
            container.add_argument(
                negation, dest=option.key, action="store_const", const=False, help=negation_help
            )
    else:
        container.add_argument(
            *names,
            dest=option.key,
            type=_text(kind),
            metavar=option.metavar,
            choices=choices,
            help=shown,
        )


def _text(kind: Kind[Any]) -> Callable[[str], Any]:
    """How a flag of `kind` reads its text."""
    return kind.parse or str


class _Toggle(argparse.BooleanOptionalAction):
    """`--x` / `--no-x`, giving the kind's two values (True and False for most)."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, on: Any, off: Any, **rest: Any):
        super().__init__(option_strings, dest, default=None, **rest)
        self.on, self.off = on, off

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        if option_string in self.option_strings:
            negated = option_string is not None and option_string.startswith("--no-")
            setattr(namespace, self.dest, self.off if negated else self.on)


def with_options(base: type[M], place: Place, options: Iterable[Option[Any]]) -> type[M]:
    """`base` with one optional field per option `place` takes, each as its declaration
    says (its type on the wire, its help as the field's description): a request's model."""
    fields: dict[str, Any] = {
        option.name_at(place): (
            option.kind.request_type | None,
            Field(None, description=option.help),
        )
        for option in options
        if place in option.places
    }
    return create_model(base.__name__, __base__=base, **fields)


@dataclass(frozen=True)
class Fields:
    """A request field's pydantic metadata: the field holds `model` (`with_options` of its
    annotated base), as `Annotated[Base, fields_at(Base, place, OPTIONS)]` says."""

    model: type[BaseModel]

    def __get_pydantic_core_schema__(
        self, source: Any, handler: Callable[[Any], core_schema.CoreSchema]
    ) -> core_schema.CoreSchema:
        return handler(self.model)


def fields_at(base: type[BaseModel], place: Place, options: Iterable[Option[Any]]) -> Fields:
    return Fields(with_options(base, place, options))


def argument(option: Option[Any]) -> FieldInfo:
    """A tool argument's pydantic metadata: its kind's constraints and its help, for
    `name: Annotated[int | None, argument(OPTION)] = None` (a tool's arguments are its
    function's parameters, which the MCP SDK reads)."""
    kind = option.kind.request_type
    constraints = get_args(kind)[1:] if get_origin(kind) is Annotated else ()
    infos = [info for info in constraints if isinstance(info, FieldInfo)]
    return FieldInfo.merge_field_infos(*infos, Field(description=option.help))


def requested(group: BaseModel, option: Option[Any], place: Place) -> Any:
    """What a request's `group` (a `with_options` model of `place`) holds for `option`; None
    if nothing."""
    return getattr(group, option.name_at(place), None)


# Reading a flag's text -----------------------------------------------------------------------


def parse_whole(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parse_count(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def parse_positive(text: str) -> float:
    value = _number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _parse_temperature(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 2:
        raise argparse.ArgumentTypeError(f"must be from 0 to 2, got {text}")
    return value


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


# The kinds of value ---------------------------------------------------------------------------

MAX_LIST = 64
"""Entries a request may give for a list (paths, hosts)."""
_MAX_PATH = 4096


class AllowedPathRequest(BaseModel):
    """A host path as a request grants it; read-only unless it says otherwise."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, max_length=_MAX_PATH)
    read_only: bool = True


WHOLE = Kind[int](Annotated[int, Field(ge=1)], "a whole number of at least 1", parse_whole)
COUNT = Kind[int](Annotated[int, Field(ge=0)], "a whole number, 0 or more", _parse_count)
POSITIVE = Kind[float](
    Annotated[float, Field(gt=0, allow_inf_nan=False)], "a positive number", parse_positive
)
ZERO_TO_TWO = Kind[float](
    Annotated[float, Field(ge=0, le=2)], "a number from 0 to 2", _parse_temperature
)
TEXT = Kind[str](str, "text")
NAME = Kind[str](Annotated[str, Field(min_length=1)], "a name")
SWITCH = Kind[bool](bool, "true or false", action="store_true")
TOGGLE = Kind[bool](bool, "true or false", action="toggle")
TEXTS = Kind[list[str]](list[str], "a list of texts", action="append")
TABLE = Kind[dict[str, Any]](dict[str, Any], "a table")
HOSTS = Kind[list[str]](
    list[str],
    "a list of host names",
    action="append",
    wire=Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=MAX_LIST)],
)
PATHS = Kind[list[str]](
    list[str],
    "a list of host paths",
    action="append",
    wire=Annotated[list[AllowedPathRequest], Field(max_length=MAX_LIST)],
)
