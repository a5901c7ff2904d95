"""Named users built in Python (alice, bob, an admin) and API clients that act as them; and the
test tiers, applied here so that nobody has to remember a marker."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from _pytest.nodeid import NodeId
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.homes import home_dir
from accounts.limits import set_limits
from accounts.models import ApiToken
from devkit import fake_ray as fake_ray_kit
from tasks.models import Task
from tasks.submit import create_task

# --- Tiers ---------------------------------------------------------------------------------------
# Each test is in exactly one tier, by its directory or the fixtures it uses (pytest.ini says
# what each costs; `make test-fast` runs `unit`, `make test` all of them):
#   unit     no real Ray, no browser, no node pool: the test database, fake Ray, live_server and
#            short-lived processes (manage.py, the argus CLI)
#   ray      a real local Ray cluster (tests/scheduler/, or a cluster fixture)
#   pool     tests/raypool's real supervisord node pool, on real Ray (also marked ray)
#   chaos    the 4-minute chaos run (also marked ray)
#   browser  Chromium through Playwright
#   fuzz     schemathesis against the API's own schema (about 2 minutes, one test)
RAY_FIXTURES = {"ray_cluster", "on_ray", "own_cluster"}
BROWSER_FIXTURES = {"browser", "page", "signed_in_page"}
CHAOS_MODULES = {"tests/scheduler/test_chaos.py"}
FUZZ_MODULES = {"tests/test_schemathesis.py"}


ROOT = Path(__file__).resolve().parent.parent


def tier_of(item: pytest.Item) -> str:
    path = Path(str(item.path)).relative_to(ROOT).as_posix()
    fixtures = set(getattr(item, "fixturenames", ()))
    if path in CHAOS_MODULES:
        return "chaos"
    if path in FUZZ_MODULES:
        return "fuzz"
    if path.startswith("tests/raypool/") and item.get_closest_marker("ray"):
        return "pool"
    if fixtures & BROWSER_FIXTURES or item.get_closest_marker("browser"):
        return "browser"
    if path.startswith("tests/scheduler/") or fixtures & RAY_FIXTURES or item.get_closest_marker("ray"):
        return "ray"
    return "unit"


# What a database decides (queries, locks, constraints): the tests that use one, which
# `make test-postgres` runs again on PostgreSQL. The fixtures are the closure pytest computed.
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server"}
# The real-Ray tests where several processes share the database (qcluster workers, a scheduler
# killed mid-write): PostgreSQL's locks differ from SQLite's, so these run on both.
DB_PROCESS_MODULES = {"tests/scheduler/test_qcluster.py", "tests/scheduler/test_crash_safety.py"}


def uses_database(item: pytest.Item) -> bool:
    return bool(DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))) or bool(
        item.get_closest_marker("django_db")
    )


# Under pytest-xdist (scripts/pytest-tiers.sh runs the Ray lane with --dist loadgroup), the
# Ray lane's longest tests start first, so that no worker is left alone with one of them at the
# end while the other idles (longest processing time first). Seconds measured on the 2-core CI
# machine (2026-11-27), a module's tests together where they share a module-scoped fixture (one
# unit of work, below); every test not named starts after these, in collection order.
SLOWEST_FIRST = (
    "tests/scheduler/test_chaos.py",  # 140 s, and two clusters of its own started
    "tests/raypool/test_pool.py",  # 7 tests on one node pool
    "tests/scheduler/test_node_failure.py",  # 2 tests of 32 s on a cluster of its own
    "tests/scheduler/test_qcluster.py::test_a_scheduler_killed_mid_submission",  # 56 s
    "tests/scheduler/test_sharing.py::test_a_high_task_preempts",  # 47 s
    "tests/raypool/test_two_heads.py",  # 37 s and 33 s
    "tests/scheduler/test_sharing.py::test_a_group_reclaims",  # 31 s
    "tests/scheduler/test_ray_down.py",  # 26 s
)


def pytest_configure(config: pytest.Config) -> None:
    # The start order is SLOWEST_FIRST's, not pytest-xdist's default (the most tests first).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def module_scoped(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture shared by its module (a cluster or node pool of its own)."""
    fixtures = getattr(item, "_fixtureinfo", None)
    defs = fixtures.name2fixturedefs.values() if fixtures is not None else ()
    return any(fixturedef.scope in ("module", "package") for chain in defs for fixturedef in chain)


def start_rank(item: pytest.Item) -> int:
    nodeid = item.nodeid.split("@")[0]  # xdist's group suffix off
    return next((i for i, slow in enumerate(SLOWEST_FIRST) if nodeid.startswith(slow)), len(SLOWEST_FIRST))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Tiers and xdist groups before every other plugin's hook (pytest-xdist reads the groups in
    its own); the Ray lane's start order after them all (pytest-django puts transactional tests
    last in its)."""
    for item in items:
        tier = tier_of(item)
        item.add_marker(tier)
        if uses_database(item):
            item.add_marker("database")
        if Path(str(item.path)).relative_to(ROOT).as_posix() in DB_PROCESS_MODULES:
            item.add_marker("db_processes")
        if tier in ("pool", "chaos"):
            item.add_marker("ray")
        # Under --dist loadgroup, a test on real Ray goes to whichever worker is free (each
        # worker starts the session's shared cluster, ~1.2 GB, ~20 s, at its first test that
        # needs it); the tests of a module with a module-scoped cluster or node pool go to one
        # worker together, so that it starts once.
        if tier in ("ray", "pool", "chaos") and module_scoped(item):
            item.add_marker(pytest.mark.xdist_group(f"ray:{Path(str(item.path)).relative_to(ROOT)}"))
    yield
    if hasattr(config, "workerinput"):  # a pytest-xdist worker's collection, handed out in its order
        if config.getvalue("loadgroup"):
            for item in items:
                keep_group(item)
        items.sort(key=start_rank)  # stable: the rest keep their order


def keep_group(item: pytest.Item) -> None:
    """pytest-xdist 3.8 groups a test by appending ``@group`` to its ``_nodeid``, which pytest
    9.2's structured node ids no longer read (pytest-xdist#1386, open): --dist loadgroup then
    grouped nothing at all. The same suffix, on the id pytest reads; a no-op once xdist sets it."""
    marks = item.iter_markers("xdist_group")
    groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")) for mark in marks})
    if groups and "@" not in item.nodeid:
        item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """Each lane of scripts/pytest-tiers.sh its own test databases (ARGUS_TEST_LANE): side by
    side, both lanes' xdist workers are gw0, gw1, … on one PostgreSQL server (SQLite's test
    files are named by process already)."""
    from django.conf import settings

    lane = os.environ.get("ARGUS_TEST_LANE")
    for db in settings.DATABASES.values():
        if lane and db["ENGINE"] != "django.db.backends.sqlite3":
            test = db.setdefault("TEST", {})
            test["NAME"] = f"{test.get('NAME') or 'test_' + db['NAME']}_{lane}"


@pytest.fixture(autouse=True)
def shared_root(settings, tmp_path: Path) -> Path:
    """Every test gets its own ARGUS_SHARED_ROOT."""
    root = tmp_path / "private"
    (root / "datasets").mkdir(parents=True)
    (root / "hf").mkdir()
    settings.ARGUS_SHARED_ROOT = root
    return root


@pytest.fixture(autouse=True)
def fresh_queue_copy() -> None:
    """The scheduler keeps its copy of the queue between ticks (tasks.queue.rows); a
    test's database is rolled back under it, so each test starts with none."""
    from tasks.queue import rows as queue_rows

    queue_rows.forget()


@pytest.fixture(autouse=True)
def fast_passwords(settings) -> None:
    # The real hasher takes ~0.3 s a password by design; tests make hundreds of users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[int]], fake_ray_kit.FakeRay]:
    """``fake_ray([4, 4])``: the scheduler talks to a fake Ray of two 4-GPU workers from then on."""
    return functools.partial(fake_ray_kit.install, monkeypatch)


@pytest.fixture
def standin_verl(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], ModuleType]]:
    """Imports a module of the stand-in's verl (tests/standin) into this process; forgotten after
    the test (the stand-in's verl is no module of this process's)."""
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "standin"))
    yield importlib.import_module
    for name in [name for name in sys.modules if name == "verl" or name.startswith("verl.")]:
        del sys.modules[name]


@pytest.fixture
def make_user(db) -> Callable[..., User]:
    def make(username: str, *, admin: bool = False, password: str = "password-" + "x" * 8) -> User:
        user = User.objects.create_user(username, password=password, is_staff=admin, is_superuser=admin)
        return user

    return make


def grant_high_priority(user: User) -> User:
    """Let ``user`` submit ``priority: high``, as an admin grants it (can_use_high_priority)."""
    set_limits(user, actor="test", can_use_high_priority=True)
    return user


@pytest.fixture
def alice(make_user) -> User:
    return make_user("alice")


@pytest.fixture
def bob(make_user) -> User:
    return make_user("bob")


@pytest.fixture
def admin(make_user) -> User:
    return make_user("admin", admin=True)


@pytest.fixture
def alice_home(alice: User) -> Path:
    return home_dir(alice.username)


@pytest.fixture
def bob_home(bob: User) -> Path:
    home = home_dir(bob.username)
    (home / "datasets" / "secret.txt").write_text("bob's secret\n")
    return home


@pytest.fixture
def client_for(db) -> Callable[[User | None], APIClient]:
    """An APIClient authenticated with a fresh Bearer token of ``user`` (None: anonymous)."""

    def make(user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            _, raw = ApiToken.issue(user, "test")
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client

    return make


PPO_SPEC = """\
workload: ppo
nnodes: 1
n_gpus_per_node: 4
model_id: Qwen/Qwen2.5-0.5B-Instruct
train_file: $HOME/common/datasets/gsm8k/train.parquet
val_file: $HOME/common/datasets/gsm8k/test.parquet
"""


# A sample pipeline, SFT -> export -> GRPO, on the gsm8k files of `datasets`: its steps as
# mappings (tests change them), the document as a mapping (PIPELINE) and as YAML (PIPELINE_YAML).
TRAIN = {
    "nnodes": 1,
    "n_gpus_per_node": 4,
    "train_file": "$HOME/common/datasets/gsm8k/train.parquet",
    "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
}
SFT = {"name": "sft", "workload": "sft", "model_id": "Qwen/Qwen2.5-0.5B-Instruct", **TRAIN}
EXPORT = {"name": "sft-export", "workload": "export", "checkpoint": "${steps.sft.checkpoint}"}
GRPO = {"name": "grpo", "workload": "grpo", "model_id": "${steps.sft-export.hf_model}", **TRAIN}
PIPELINE = {"name": "qwen-sft-grpo", "steps": [SFT, EXPORT, GRPO]}
PIPELINE_YAML = yaml.safe_dump(PIPELINE, sort_keys=False)
# SFT -> export -> an eval of the exported model: the pipeline that ends with a result.
EVAL = {
    "name": "eval",
    "workload": "eval",
    "model_id": "${steps.sft-export.hf_model}",
    "nnodes": 1,
    "n_gpus_per_node": 4,
    "val_file": TRAIN["val_file"],
}
EVAL_PIPELINE = {"name": "qwen-sft-eval", "steps": [SFT, EXPORT, EVAL]}


@pytest.fixture
def datasets(shared_root: Path) -> Path:
    """The shared gsm8k files the sample specs read."""
    gsm8k = shared_root / "datasets" / "gsm8k"
    gsm8k.mkdir(parents=True)
    for name in ("train.parquet", "test.parquet"):
        (gsm8k / name).write_bytes(b"PAR1")
    return gsm8k


@pytest.fixture
def make_task(datasets: Path) -> Callable[..., Task]:
    """A task created the way the API creates one: a spec parsed, then tasks.submit.create_task."""

    def make(user: User, spec: str = PPO_SPEC, **changes: object) -> Task:
        from tasks.queue import reasons
        from tasks.specs.parse import parse_spec

        parsed = parse_spec(spec, username=user.username)
        task = create_task(user, parsed, f"api:{user.username}")
        if "created_at" in changes and task.queued_at is not None:
            changes.setdefault("queued_at", changes["created_at"])  # created and queued then
        if "pending_reason" in changes:  # a row of its own
            reasons.write({task.pk: str(changes.pop("pending_reason"))}, states=None)  # whatever its state
            task.refresh_from_db()
        if changes:
            Task.objects.filter(pk=task.pk).update(**changes)
            task.refresh_from_db()
        return task

    return make
