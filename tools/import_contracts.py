"""Import-linter contract types that import-linter lacks: "may import only these", and "may
import only the standard library (and what is staged with it)".

`forbidden` lists what may not be imported; the rule "sandboxd may import only logos's leaf
vocabulary" is the other way round, and as a forbidden contract it would need every other
logos module listed (and kept listed as logos grows). `only_allowed` names what is allowed:

    [[tool.importlinter.contracts]]
    type = "only_allowed"              # registered under contract_types in pyproject.toml
    source_modules = ["sandboxd"]
    target = "logos"
    allowed_modules = ["logos.result", "logos.options", "logos.runners.capture"]

It is broken by any import, from a source module (or one below it) to a module of `target`,
that is not one of `allowed_modules`; and, so that the allowance cannot widen by the back
door, by an allowed module importing a module of `target` that is not allowed either.

`standard_library_only` is for code copied somewhere nothing else is installed (the
container's Python, run without site-packages from a directory holding only these files):

    [[tool.importlinter.contracts]]
    type = "standard_library_only"
    source_modules = ["sandboxd.inside"]
    staged_modules = ["logos.runners.capture"]

It is broken by any import, from a source module (or one below it) or a staged module, of
anything but the standard library, those modules, and their bare names (copied side by side,
they import each other as `import capture`). It needs `include_external_packages = true`:
without it the graph holds no other package, and an import of one could not be seen.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import cast

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output
from importlinter.domain.imports import Module


@dataclass(frozen=True, order=True)
class Violation:
    importer: str
    imported: str
    line_numbers: tuple[int, ...]

    def describe(self) -> str:
        lines = ", ".join(f"l.{number}" for number in self.line_numbers)
        return f"{self.importer} -> {self.imported}" + (f" ({lines})" if lines else "")


class OnlyAllowedContract(Contract):
    """Modules of `source_modules` import from `target` only `allowed_modules`."""

    type_name = "only_allowed"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    target = fields.ModuleField()
    allowed_modules = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        target = cast(Module, self.target).name
        allowed = _names(self.allowed_modules)
        _check_known(graph, allowed | {target})
        importers = allowed | _with_descendants(graph, self.source_modules)
        violations = sorted(
            _violation(graph, importer, imported)
            for importer in importers
            for imported in graph.find_modules_directly_imported_by(importer)
            if _within(imported, target) and imported not in allowed
        )
        return ContractCheck(kept=not violations, metadata={"violations": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        allowed = ", ".join(module.name for module in cast(list[Module], self.allowed_modules))
        _render(check, f"is not allowed (only {allowed})")


class StandardLibraryOnlyContract(Contract):
    """Modules of `source_modules` and `staged_modules` import only the standard library and
    each other."""

    type_name = "standard_library_only"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    staged_modules = fields.ListField(subfield=fields.ModuleField(), required=False)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        if str(self.session_options.get("include_external_packages")) not in ("True", "true"):
            raise ValueError(
                f"{self.type_name} needs include_external_packages = true: without it the "
                "graph holds no other package, so an import of one cannot be seen"
            )
        staged = _names(self.staged_modules or [])
        _check_known(graph, staged)
        roots = _names(self.source_modules)
        copied = (_with_descendants(graph, self.source_modules) - roots) | staged
        members = copied | roots
        bare_names = {name.rpartition(".")[2] for name in copied}
        violations = sorted(
            _violation(graph, importer, imported)
            for importer in members
            for imported in graph.find_modules_directly_imported_by(importer)
            if imported not in members
            and imported not in bare_names
            and imported.partition(".")[0] not in sys.stdlib_module_names
        )
        return ContractCheck(kept=not violations, metadata={"violations": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        _render(check, "is neither the standard library nor staged with it")


def _names(modules: object) -> set[str]:
    return {module.name for module in cast(list[Module], modules)}


def _check_known(graph: ImportGraph, names: set[str]) -> None:
    for name in sorted(names):
        if name not in graph.modules:
            raise ValueError(f"{name} is not a module of the packages import-linter reads")


def _with_descendants(graph: ImportGraph, modules: object) -> set[str]:
    found: set[str] = set()
    for name in _names(modules):
        found |= {name} | graph.find_descendants(name)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _violation(graph: ImportGraph, importer: str, imported: str) -> Violation:
    details = graph.get_import_details(importer=importer, imported=imported)
    return Violation(importer, imported, tuple(sorted(d["line_number"] for d in details)))


def _render(check: ContractCheck, why: str) -> None:
    for violation in cast(list[Violation], check.metadata["violations"]):
        output.print_error(f"{violation.describe()} {why}")
        output.new_line()
