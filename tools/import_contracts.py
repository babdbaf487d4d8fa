"""An import-linter contract type that import-linter lacks: "may import only these".

`forbidden` lists what may not be imported; the rule "sandboxd may import only logos's leaf
vocabulary" is the other way round, and as a forbidden contract it would need every other
logos module listed (and kept listed as logos grows). This contract names what is allowed:

    [[tool.importlinter.contracts]]
    type = "only_allowed"              # registered under contract_types in pyproject.toml
    source_modules = ["sandboxd"]
    target = "logos"
    allowed_modules = ["logos.result", "logos.options", "logos.runners.capture"]

It is broken by any import, from a source module (or one below it) to a module of `target`,
that is not one of `allowed_modules`; and, so that the allowance cannot widen by the back
door, by an allowed module importing a module of `target` that is not allowed either.
"""

from __future__ import annotations

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
        allowed = {module.name for module in cast(list[Module], self.allowed_modules)}
        for name in sorted(allowed | {target}):
            if name not in graph.modules:
                raise ValueError(f"{name} is not a module of the packages import-linter reads")
        importers = set(allowed)
        for source in cast(list[Module], self.source_modules):
            importers |= {source.name} | graph.find_descendants(source.name)
        violations = sorted(
            _violation(graph, importer, imported)
            for importer in importers
            for imported in graph.find_modules_directly_imported_by(importer)
            if _within(imported, target) and imported not in allowed
        )
        return ContractCheck(kept=not violations, metadata={"violations": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        allowed = ", ".join(module.name for module in cast(list[Module], self.allowed_modules))
        for violation in cast(list[Violation], check.metadata["violations"]):
            output.print_error(f"{violation.describe()} is not allowed (only {allowed})")
            output.new_line()


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _violation(graph: ImportGraph, importer: str, imported: str) -> Violation:
    details = graph.get_import_details(importer=importer, imported=imported)
    return Violation(importer, imported, tuple(sorted(d["line_number"] for d in details)))
