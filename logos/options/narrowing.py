"""The one narrowing: what a caller gets of what its server allows, or why not.

A served run and a project's agent (`logos serve`), a `task` call (`logos mcp`) and a `run`
call (`sandboxd mcp`) each ask for some options; their server (its config file and flags, a
launch, a project) is the `Ceiling`. Each option is narrowed as its declaration says
(`Narrowing`): a number only lower, a list only a subset, a path only inside (read-only
staying read-only), network only off. What is not asked is the ceiling's default. A refusal
names the field as the caller wrote it and where its server set the limit, in the same words
in every front.

Paths narrow through `logos.ceiling`: the server's roots, pinned when it granted them; the
check here is early and friendly, in the words of the sandbox, which is sent the ceiling and
decides.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import BaseModel, TypeAdapter, ValidationError

from logos.ceiling import PathCeiling, early_refusal
from logos.options import AllowedPath
from logos.options.declarations import ALLOW, ALLOW_HOST, NETWORK, options_at
from logos.options.option import Narrowing, Option, Place, Values, requested

RULE = "a caller may narrow {owner}'s options, never widen them"


@dataclass(frozen=True)
class Asked:
    """What a caller asked of one option, named as the caller wrote it."""

    option: Option[Any]
    field: str
    value: object


def asked_in(group: BaseModel, place: Place) -> list[Asked]:
    """What a request's `group` (a field typed with `option.fields_at`) asks of the options
    `place` takes: those it gives."""
    return [
        Asked(option, place.prefix + option.name_at(place), value)
        for option in options_at(place)
        if (value := requested(group, option, place)) is not None
    ]


@dataclass(frozen=True)
class Bound:
    """One option's ceiling."""

    widest: object
    """The most a caller may ask; None: nothing here bounds it (what lies beyond decides)."""
    default: object
    """What a caller that does not ask gets."""
    set_by: Option[Any]
    """The option whose key a refusal names (a launch's `max_timeout` bounds `timeout`)."""


@dataclass(frozen=True)
class Ceiling:
    """What a server (a launch, a project) allows its callers."""

    owner: str
    """Whose options they narrow, as a refusal says it: "this server", "the project"."""
    set_in: tuple[Place, ...]
    """Where the owner's options are set, for a refusal to name."""
    bounds: Mapping[str, Bound] = field(default_factory=dict)
    """By option key."""
    paths: PathCeiling | None = None
    """The roots a path must lie within (`logos.ceiling`); None: none here."""

    @classmethod
    def of(
        cls,
        owner: str,
        set_in: tuple[Place, ...],
        widest: Mapping[Option[Any], object],
        *,
        defaults: Mapping[Option[Any], object] | None = None,
        set_by: Mapping[Option[Any], Option[Any]] | None = None,
        paths: PathCeiling | None = None,
    ) -> Ceiling:
        """A ceiling whose callers get `widest` unless they ask (or `defaults` say) less."""
        defaults, set_by = defaults or {}, set_by or {}
        bounds = {
            option.key: Bound(value, defaults.get(option, value), set_by.get(option, option))
            for option, value in widest.items()
        }
        return cls(owner, set_in, bounds, paths)


@dataclass(frozen=True)
class Refusal:
    field: str
    what: str
    """The refusal's core, for a list of them: "host x is not among the project's hosts"."""
    message: str
    """All of it: the field, what, where its server set it, and what to do."""
    wider: bool
    """It asks for more than the ceiling (a 403); else it is malformed or contradicts
    itself (a 400)."""


class NarrowingRefused(ValueError):
    """What a caller asked cannot be narrowed from its ceiling; the message is the first
    refusal (a malformed one first), `refusals` all of them."""

    def __init__(self, refusals: Sequence[Refusal]) -> None:
        ordered = sorted(refusals, key=lambda refusal: refusal.wider)
        super().__init__(ordered[0].message)
        self.refusals = tuple(ordered)
        self.wider = all(refusal.wider for refusal in ordered)


class Granted(Values):
    """What a caller gets, by option: what it asked (narrowed), else its ceiling's default;
    its paths and hosts as a command's options take them."""

    @property
    def paths(self) -> tuple[AllowedPath, ...]:
        return cast("tuple[AllowedPath, ...]", self._given.get(ALLOW.key, ()))

    @property
    def hosts(self) -> tuple[str, ...]:
        return cast("tuple[str, ...]", self._given.get(ALLOW_HOST.key, ()))


@dataclass(frozen=True)
class Narrowed:
    values: Granted
    """Each bounded option: what was asked (also where it was refused), else its default."""
    refusals: tuple[Refusal, ...]


def narrowed(ceiling: Ceiling, asked: Iterable[Asked]) -> Granted:
    """What the caller gets; NarrowingRefused when it asks for more, or for nonsense."""
    outcome = narrow(ceiling, asked)
    if outcome.refusals:
        raise NarrowingRefused(outcome.refusals)
    return outcome.values


def narrow(ceiling: Ceiling, asked: Iterable[Asked]) -> Narrowed:
    """What the caller asked, narrowed, and every refusal (a project grants some of them)."""
    given = {key: bound.default for key, bound in ceiling.bounds.items()}
    refusals: list[Refusal] = []
    asked = list(asked)
    for ask in asked:
        problem = _malformed(ask)
        if problem is not None:
            refusals.append(Refusal(ask.field, problem, f"{ask.field} {problem}", wider=False))
            continue
        value = _normalized(ask)
        refusals.extend(_wider(ceiling, ask, value))
        given[ask.option.key] = value
    by_key = {ask.option.key: ask for ask in asked}
    hosts = by_key.get(ALLOW_HOST.key)
    if hosts is not None and hosts.value and given.get(NETWORK.key):
        refusals.append(_hosts_with_network(ceiling, hosts, by_key.get(NETWORK.key)))
    return Narrowed(Granted(given), tuple(refusals))


def _malformed(ask: Asked) -> str | None:
    """Why `ask.value` is not of its option's kind, or None."""
    option, value = ask.option, ask.value
    if option.narrowing is Narrowing.LOWER:
        try:
            _adapter(option).validate_python(value, strict=True)
        except ValidationError:
            return f"{value!r} is not {option.kind.words}"
    elif option.narrowing is Narrowing.OFF and not isinstance(value, bool):
        return f"{value!r} is not {option.kind.words}"
    elif option.narrowing is Narrowing.SUBSET:
        if not isinstance(value, list | tuple) or not all(_is_host(host) for host in value):
            return f"{value!r} is not {option.kind.words}"
    elif option.narrowing is Narrowing.INSIDE:
        if not isinstance(value, list | tuple):
            return f"{value!r} is not {option.kind.words}"
        for path in value:
            name = getattr(path, "path", None)
            if not isinstance(name, str) or "\0" in name or not os.path.isabs(name):
                return f"{name!r} must be an absolute host path"
            if not isinstance(getattr(path, "read_only", None), bool):
                return f"{name} has no read_only true or false"
    return None


@functools.cache
def _adapter(option: Option[Any]) -> TypeAdapter[Any]:
    """The check of `option`'s kind, made once (making one costs more than many checks)."""
    return TypeAdapter(option.kind.annotation)


def _is_host(host: object) -> bool:
    return isinstance(host, str) and bool(host.strip()) and "\0" not in host


def _normalized(ask: Asked) -> object:
    if ask.option.narrowing is Narrowing.INSIDE:
        paths: Sequence[Any] = ask.value  # type: ignore[assignment]  # checked by _malformed
        return tuple(AllowedPath(path=p.path, read_only=p.read_only) for p in paths)
    if ask.option.narrowing is Narrowing.SUBSET:
        hosts: Sequence[str] = ask.value  # type: ignore[assignment]  # checked by _malformed
        return tuple(hosts)
    return ask.value


def _wider(ceiling: Ceiling, ask: Asked, value: Any) -> list[Refusal]:
    option = ask.option
    if option.narrowing is Narrowing.INSIDE:
        return _outside_paths(ceiling, ask.field, value)
    bound = ceiling.bounds.get(option.key)
    if bound is None or bound.widest is None:
        return []
    where = _where(ceiling, bound.set_by)
    said = f" ({where})" if where else ""
    rule = RULE.format(owner=ceiling.owner)
    owner = ceiling.owner
    if option.narrowing is Narrowing.LOWER:
        widest: float = bound.widest  # type: ignore[assignment]  # a LOWER bound is a number
        if value <= widest:
            return []
        what = f"{value:g} is above {owner}'s limit of {widest:g}"
        message = f"{ask.field} {what}{said}: {rule}; ask for {widest:g} or less"
        return [Refusal(ask.field, what, message, wider=True)]
    if option.narrowing is Narrowing.OFF:
        if not value or bound.widest:
            return []
        what = f"network access to every host, which {owner} does not give"
        message = f"{ask.field} asks for {what}{said}: {rule}; leave it out"
        return [Refusal(ask.field, what, message, wider=True)]
    network = ceiling.bounds.get(NETWORK.key)
    if option.narrowing is Narrowing.SUBSET and not (network and network.widest):
        allowed: Sequence[str] = bound.widest  # type: ignore[assignment]  # a SUBSET is a list
        shown = "; ".join(part for part in (", ".join(allowed) or "none", where) if part)
        refused = []
        for host in value:
            if not any(_admits(pattern, host) for pattern in allowed):
                what = f"host {host} is not among {owner}'s hosts"
                message = f"{ask.field}: {what} ({shown}): {rule}; ask for some of them"
                refused.append(Refusal(ask.field, what, message, wider=True))
        return refused
    return []


def _outside_paths(ceiling: Ceiling, field: str, paths: Sequence[AllowedPath]) -> list[Refusal]:
    if ceiling.paths is None:
        return []
    refused = []
    for path in paths:
        why = early_refusal(path.path, read_only=path.read_only, ceiling=ceiling.paths)
        if why is not None:
            # WHY not prefixed with the field: the path names itself, and the words stay
            # the sandbox's own, whichever of the two refuses it.
            refused.append(Refusal(field, why, why, wider=True))
    return refused


def _admits(pattern: str, host: str) -> bool:
    """Whether a ceiling's host (a name, or a pattern such as `*.example.org`) holds `host`."""
    pattern, host = pattern.lower(), host.lower()
    return host == pattern or fnmatch.fnmatchcase(host, pattern)


def _hosts_with_network(ceiling: Ceiling, hosts: Asked, network: Asked | None) -> Refusal:
    if network is not None:
        message = hosts_with_network(hosts.field, network.field)
        return Refusal(hosts.field, message, message, wider=False)
    bound = ceiling.bounds.get(NETWORK.key)
    where = _where(ceiling, NETWORK if bound is None else bound.set_by)
    what = f"{ceiling.owner}'s sandboxes have the network on" + (f" ({where})" if where else "")
    message = (
        f"{hosts.field} limits a sandbox without network to those hosts, and {what}, which "
        f"opens every host: leave {hosts.field} out"
    )
    return Refusal(hosts.field, what, message, wider=False)


def hosts_with_network(hosts_field: str, network_field: str) -> str:
    """The refusal of a host list given with the network on, which opens every host."""
    return (
        f"{hosts_field} limits a sandbox without network to those hosts, and {network_field} "
        "opens every host: use one or the other"
    )


def sandbox_only(fields: Sequence[str], kind_field: str) -> str:
    """The refusal of sandbox options given for local commands."""
    shown = fields[0] if len(fields) == 1 else f"{', '.join(fields[:-1])} and {fields[-1]}"
    verb = "is" if len(fields) == 1 else "are"
    return (
        f'{shown} {verb} for the sandbox ({kind_field} "sandbox"): local commands reach the '
        "whole machine"
    )


def _where(ceiling: Ceiling, option: Option[Any]) -> str:
    """`max_steps in its config file, or --max-steps`: where the ceiling's owner sets
    `option`, as its places allow; empty where none does."""
    parts: list[str] = []
    for place in ceiling.set_in:
        if place not in option.places:
            continue
        if place in (Place.CONFIG_FILE, Place.SANDBOXD_LAUNCH):
            parts.append(f"{option.key} in its config file")
        if place in (Place.COMMAND_LINE, Place.SANDBOXD_LAUNCH):
            parts.append(option.flag_names[0])
        if place is Place.PROJECT:
            parts.append(f"the project's {option.name}")
    return ", or ".join(dict.fromkeys(parts))
