"""Every package of logos and sandboxd marks what other packages may touch with `__all__`:
the modules, subpackages and names another package, the benchmark, the tools or an entry
point may import. A module a package leaves off is its own, free to change without a look
outside it. (The root `logos` is the exception: its `__all__` is the library's API, names
re-exported from their homes, `test_public_names`.)"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("logos", "sandboxd")
IMPORTERS = (*PACKAGES, "bench", "tools")
"""What imports the packages besides themselves (the tests may reach inside any module)."""


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(root: Path, tops: tuple[str, ...]) -> dict[str, Path]:
    """Each module under `tops` by its dotted name."""
    return {
        module_name(path, root): path
        for top in tops
        for path in (root / top).rglob("*.py")
        if "__pycache__" not in path.parts
    }


def declared_surface(init: Path) -> list[str] | None:
    """The package's `__all__`, as written, or None when it has none."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    return None


def imported(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """What `module` imports: modules, or `module.name` for a name taken from a package."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                child = f"{base}.{alias.name}"
                yield child if child in modules or _is_package(base, modules) else base


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    path = modules.get(name)
    return path is not None and path.name == "__init__.py"


def entry_points(root: Path) -> list[str]:
    """The modules pyproject.toml's scripts and entry points name."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    targets = [*project.get("scripts", {}).values()]
    for group in project.get("entry-points", {}).values():
        targets += group.values()
    return [target.partition(":")[0] for target in targets]


def reaches_inside(root: Path) -> list[str]:
    """Each import from outside a package of a child its `__all__` does not list."""
    modules = sources(root, IMPORTERS)
    surfaces = {
        name: declared_surface(path)
        for name, path in modules.items()
        if path.name == "__init__.py" and name.split(".")[0] in PACKAGES and name != "logos"
    }
    uses = [
        (importer, target)
        for importer, path in modules.items()
        for target in imported(importer, path, modules)
    ]
    uses += [("pyproject.toml", target) for target in entry_points(root)]
    found = []
    for importer, target in uses:
        parts = target.split(".")
        for depth in range(1, len(parts)):
            package, child = ".".join(parts[:depth]), parts[depth]
            if package not in surfaces or importer == package:
                continue
            if importer.startswith(f"{package}."):
                continue
            if child not in (surfaces[package] or ()):
                found.append(f"{importer} imports {package}.{child}: not in {package}.__all__")
    return sorted(set(found))


def test_every_package_lists_what_may_be_touched_and_each_entry_is_there() -> None:
    modules = sources(ROOT, PACKAGES)
    for name, path in modules.items():
        if path.name != "__init__.py" or name == "logos":
            continue
        surface = declared_surface(path)
        assert surface is not None, f"{name} has no __all__: list what other packages may use"
        bound = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign):
                bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                bound.add(node.target.id)
            elif isinstance(node, ast.ImportFrom):
                bound |= {alias.asname or alias.name for alias in node.names}
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                bound.add(node.name)
        children = {
            child.removeprefix(f"{name}.")
            for child in modules
            if child.startswith(f"{name}.") and "." not in child.removeprefix(f"{name}.")
        }
        for entry in surface:
            assert entry in bound or entry in children, f"{name}.__all__ lists {entry}: no such"


def test_from_outside_a_package_only_what_its_all_lists_is_imported() -> None:
    assert reaches_inside(ROOT) == []


def test_a_reach_inside_a_package_is_found(tmp_path: Path) -> None:
    """The check above can fail: a module of another package that imports a module the
    package's `__all__` leaves off, by any form of import, is named."""
    (tmp_path / "pyproject.toml").write_text('[project]\nscripts = {tool = "logos.cli:main"}\n')
    for top in IMPORTERS:
        (tmp_path / top).mkdir()
    package = tmp_path / "logos" / "parts"
    package.mkdir()
    (package / "__init__.py").write_text('__all__ = ["shown"]\n')
    (package / "shown.py").write_text("")
    (package / "hidden.py").write_text("")
    (package / "sibling.py").write_text("from logos.parts import hidden\n")  # inside: allowed
    (tmp_path / "logos" / "__init__.py").write_text("")
    (tmp_path / "logos" / "cli.py").write_text("")
    (tmp_path / "sandboxd" / "a.py").write_text("from logos.parts.hidden import x\n")
    (tmp_path / "bench" / "b.py").write_text("import logos.parts.hidden\n")
    (tmp_path / "tools" / "c.py").write_text("from logos.parts import shown, hidden\n")
    assert reaches_inside(tmp_path) == [
        "bench.b imports logos.parts.hidden: not in logos.parts.__all__",
        "sandboxd.a imports logos.parts.hidden: not in logos.parts.__all__",
        "tools.c imports logos.parts.hidden: not in logos.parts.__all__",
    ]
