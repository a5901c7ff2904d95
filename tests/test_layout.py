"""The tree's layering for tests and benches: the benches and the devkit they share with the
tests import nothing from tests/, no app imports the devkit, and no two test files share a name
(tests mirror the code: a name says what a file tests wherever it is found)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("tasks", "accounts", "webhooks", "common", "raypool", "argus_site")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def importers(folders: tuple[str, ...], package: str) -> list[str]:
    return sorted(
        f"{path.relative_to(ROOT)}: {module}"
        for folder in folders
        for path in (ROOT / folder).rglob("*.py")
        for module in imported_modules(path)
        if module == package or module.startswith(f"{package}.")
    )


def test_the_benches_and_the_devkit_import_nothing_from_tests() -> None:
    assert importers(("bench", "devkit"), "tests") == []


def test_no_app_imports_the_devkit() -> None:
    assert importers(APPS, "devkit") == []


def test_the_scan_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from tests.x import y\n")
    assert "tests.x" in imported_modules(module)


def test_no_two_test_files_share_a_name() -> None:
    names = Counter(path.name for path in (ROOT / "tests").rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
