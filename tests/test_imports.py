"""The house's floors hold: no import circle between modules, and no app reaching up a floor.

README's layout names the floors: common/ below every app; accounts/ and raypool/ beside each
other above it; tasks/ above them; webhooks/ above tasks; argus_site/ (configuration only) on top.
grimp reads every import statically (those inside functions too), so a circle or an upward
import that only runs late is found as well.
"""

import itertools

import grimp
import pytest

pytestmark = pytest.mark.unit

# From the top floor down; the apps of one floor may not import each other either.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("argus_site",),
    ("webhooks",),
    ("tasks",),
    ("accounts", "raypool"),
    ("common",),
)
PACKAGES = [package for floor in FLOORS for package in floor]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # The packages are found on sys.path, where pytest's rootdir puts the repository.
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def _imports(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    return [
        (importer, imported)
        for importer in sorted(graph.modules)
        for imported in sorted(graph.find_modules_directly_imported_by(importer))
    ]


def test_no_module_imports_another_that_imports_it_back(graph: grimp.ImportGraph) -> None:
    circles = {
        tuple(sorted(chain))
        for importer, imported in _imports(graph)
        if (chain := graph.find_shortest_chain(importer=imported, imported=importer))
    }
    assert sorted(circles) == []


def _app(module: str) -> str:
    return module.split(".", 1)[0]


def test_no_app_imports_one_on_its_own_floor_or_above(graph: grimp.ImportGraph) -> None:
    floor_of = {package: level for level, floor in enumerate(FLOORS) for package in floor}
    upward = [
        f"{importer} -> {imported}"
        for importer, imported in _imports(graph)
        if _app(importer) != _app(imported) and floor_of[_app(imported)] <= floor_of[_app(importer)]
    ]
    assert upward == []


def test_the_check_sees_an_upward_import_and_a_circle(graph: grimp.ImportGraph) -> None:
    """The two tests above can fail: the graph they read holds the imports the apps really make."""
    assert graph.direct_import_exists(importer="tasks.models", imported="common.redact")
    assert graph.find_shortest_chain(importer="webhooks.models", imported="tasks.choices")
    everything = set(itertools.chain.from_iterable(_imports(graph)))
    assert {"tasks.scheduler.tick", "accounts.models", "raypool.discovery"} <= everything
