"""The documentation against the tree: the configuration reference (docs/configuration.md) and
.env.example list exactly the environment variables the code reads, README.md stays a front
door, its layout names only paths that exist, and every relative link and anchor resolves."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from common.renamed_settings import RENAMED

ROOT = Path(__file__).resolve().parent.parent
CONFIGURATION = ROOT / "docs" / "configuration.md"
ENV_EXAMPLE = ROOT / ".env.example"
README = ROOT / "README.md"
README_MAX_LINES = 200

# Where a setting may be read: the apps, the node pool, the CLI, the scripts and the image. Tests
# and benches set variables for what they start; their own knobs are not the site's settings.
SOURCE_DIRS = ("argus_site", "common", "accounts", "tasks", "webhooks", "raypool", "cli", "scripts", "deploy")
SETTING = re.compile(r"ARGUS_[A-Z0-9_]+|DATABASE_URL")
# `$NAME` / `${NAME...}` in a shell script or compose file (comments aside).
SHELL_READ = re.compile(r"\$\{?(ARGUS_[A-Z0-9_]+)")


WRITERS = ("setenv", "delenv", "putenv", "pop")


def _setting_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and SETTING.fullmatch(node.value):
        return node.value
    return None


def _python_reads(source: str) -> set[str]:
    """The settings a module reads: a call whose first argument is a setting's name
    (`os.environ.get`, `os.getenv`, the settings' `envint`…, raypool's `env.text`…, `setdefault`)
    or `environ["NAME"]` loaded."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.Call) and node.args:
            writes = isinstance(node.func, ast.Attribute) and node.func.attr in WRITERS
            name = None if writes else _setting_name(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            name = _setting_name(node.slice)
        if name is not None:
            names.add(name)
    return names


def _shell_reads(source: str) -> set[str]:
    lines = (line for line in source.splitlines() if not line.lstrip().startswith("#"))
    return {name for line in lines for name in SHELL_READ.findall(line)}


def read_settings(root: Path = ROOT) -> dict[str, set[str]]:
    """Each setting the code reads -> the files that read it."""
    found: dict[str, set[str]] = {}
    for folder in SOURCE_DIRS:
        for path in sorted((root / folder).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            if path.suffix == ".py":
                names = _python_reads(path.read_text())
            elif path.suffix in (".sh", ".yaml", ".yml") or path.name == "Dockerfile":
                names = _shell_reads(path.read_text())
            else:
                continue
            for name in names:
                found.setdefault(name, set()).add(path.relative_to(root).as_posix())
    return found


def documented_settings(text: str) -> set[str]:
    """The names in the first column of the reference's tables (the renamed ones' old names aside:
    they are read through their new names, common.renamed_settings)."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            first = line.split("|")[1]
            names.update(name for name in re.findall(r"`([^`]+)`", first) if SETTING.fullmatch(name))
    return names - set(RENAMED)


def renamed_in_reference(text: str) -> dict[str, str]:
    """Old name -> new name, from the rows of the reference whose first column is an old name."""
    rows = (line.split("|") for line in text.splitlines() if line.startswith("| `"))
    return {
        old: new
        for cells in rows
        if (old := cells[1].strip().strip("`")) in RENAMED
        for new in re.findall(r"`([^`]+)`", cells[2])
    }


def example_settings(text: str) -> set[str]:
    """The names .env.example assigns."""
    return {match for match in re.findall(r"^([A-Z][A-Z0-9_]*)=", text, re.MULTILINE) if SETTING.fullmatch(match)}


def drift(read: dict[str, set[str]], listed: set[str], where: str) -> list[str]:
    problems = [
        f"{name} is read ({', '.join(sorted(read[name]))}) but not in {where}" for name in sorted(set(read) - listed)
    ]
    problems += [f"{name} is in {where} but read nowhere" for name in sorted(listed - set(read))]
    return problems


def test_the_configuration_reference_lists_exactly_the_settings_read():
    problems = drift(read_settings(), documented_settings(CONFIGURATION.read_text()), "docs/configuration.md")
    assert problems == []


def test_env_example_lists_exactly_the_settings_read():
    assert drift(read_settings(), example_settings(ENV_EXAMPLE.read_text()), ".env.example") == []


def test_the_reference_lists_each_renamed_setting_with_its_new_name():
    # Old names are read only through their new ones (common.renamed_settings), never directly,
    # and the reference says which new name each became.
    read = read_settings()
    assert sorted(set(RENAMED) & set(read)) == []
    assert sorted(new for new, _unit in RENAMED.values() if new not in read) == []
    assert renamed_in_reference(CONFIGURATION.read_text()) == {old: new for old, (new, _unit) in RENAMED.items()}


def test_the_scan_finds_reads_in_every_kind_of_source():
    # The scan itself: a setting from each way the tree reads one, so that an empty scan (or one
    # that stopped seeing a kind of file) cannot pass the two tests above.
    read = read_settings()
    assert "argus_site/settings.py" in read["ARGUS_EXPORT_CPUS"]  # envfloat
    assert "argus_site/settings.py" in read["ARGUS_SECRET_KEY"]  # os.environ.get
    assert "raypool/config.py" in read["ARGUS_TTL_S"]  # env.seconds
    assert "cli/argus_cli/config.py" in read["ARGUS_TOKEN"]
    assert "scripts/run_local.py" in read["ARGUS_DEV_GPUS"]
    assert "scripts/with-postgres.sh" in read["ARGUS_PG_PORT"]
    assert "deploy/entrypoint.sh" in read["ARGUS_ENTRYPOINT_DRY_RUN"]
    assert "deploy/gunicorn.conf.py" in read["ARGUS_BIND"]


def test_drift_is_reported_both_ways(tmp_path):
    (tmp_path / "raypool").mkdir()
    (tmp_path / "raypool" / "knobs.py").write_text(
        'import os\nos.environ.get("ARGUS_NEW_KNOB")\nos.environ["ARGUS_OLD_KNOB"] = "1"\n'
        'monkeypatch.setenv("ARGUS_SET_KNOB", "1")\n'
    )
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.sh").write_text("# ${ARGUS_COMMENT_KNOB}\nport=${ARGUS_SHELL_KNOB:-1}\n")
    read = read_settings(tmp_path)
    assert set(read) == {"ARGUS_NEW_KNOB", "ARGUS_SHELL_KNOB"}
    listed = documented_settings(
        "| variable | default | what |\n|---|---|---|\n"
        "| `ARGUS_SHELL_KNOB` / `ARGUS_GONE_KNOB` | `1` | `ARGUS_NEW_KNOB` named in a description only |\n"
    )
    assert drift(read, listed, "the reference") == [
        "ARGUS_NEW_KNOB is read (raypool/knobs.py) but not in the reference",
        "ARGUS_GONE_KNOB is in the reference but read nowhere",
    ]
    assert example_settings("ARGUS_SHELL_KNOB=1   # a comment\n# ARGUS_COMMENTED=1\n") == {"ARGUS_SHELL_KNOB"}


def test_the_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move the detail to docs/"
    head = "\n".join(lines[:12])
    assert "make run" in head and "make test" in head


def _layout_block(text: str) -> list[str]:
    section = text.split("\n## Layout\n", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


# A path in the layout's text: anything with a slash, or a module, script, YAML or Markdown file.
PATH_WORD = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]*|[A-Za-z0-9_-][A-Za-z0-9_.-]*\.(?:py|sh|yaml|md)\b")


def layout_paths(text: str) -> list[tuple[str, str]]:
    """(folder, path) for every path the README's layout names: an entry's own names are under its
    parent (`tasks/` then `  choices.py`), the paths in its description under the entry's folder."""
    named: list[tuple[str, str]] = []
    parent = ""
    folder = ""
    for line in _layout_block(text):
        entry = re.match(r"^( {0,2})(\S.*?)(?: {2,}|$)(.*)$", line)
        if entry and len(entry.group(1)) <= 2 and not line.startswith("   "):
            indent, names, description = entry.groups()
            base = parent if indent else ""
            entries = [name.strip() for name in names.split(",")]
            for name in entries:
                named.append((base, name))
            folder = base + entries[0] if len(entries) == 1 and entries[0].endswith("/") else base
            if not indent:
                parent = folder
        else:
            description = line
        for word in PATH_WORD.findall(description):
            named.append((folder, word))
    return named


def _resolve(folder: str, path: str) -> str | None:
    """The path as named under its entry's folder, else from the top (`tests/standin/`)."""
    for candidate in (folder + path, path):
        if (ROOT / candidate).exists():
            return candidate.rstrip("/")
    return None


def test_the_readme_layout_names_only_paths_that_exist():
    named = layout_paths(README.read_text())
    assert len(named) > 40  # the parse found the block
    missing = [f"{folder}{path}" for folder, path in named if _resolve(folder, path) is None]
    assert missing == []


def _ignored() -> set[str]:
    """The folders .gitignore names (var/, node_modules/, …): not part of the tree."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return {line.strip("/") for line in lines if line.endswith("/") and "*" not in line}


def test_the_readme_layout_names_every_folder_of_the_tree():
    # The other way round: a new top-level folder, or a new package in tasks/, gets its line.
    named = {_resolve(folder, path) for folder, path in layout_paths(README.read_text())}
    ignored = _ignored()
    folders = [
        path.name
        for path in ROOT.iterdir()
        if path.is_dir() and not path.name.startswith(".") and path.name not in ignored and path.name != "__pycache__"
    ]
    packages = [
        f"tasks/{path.parent.name}"
        for path in (ROOT / "tasks").glob("*/__init__.py")
        if path.parent.name not in ("migrations", "templatetags")
    ]
    unnamed = [folder for folder in folders if folder not in named]
    unnamed += [package for package in packages if package not in named]
    assert unnamed == []


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return {_slug(match) for match in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)}


MARKDOWN = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md", ROOT / "cli" / "README.md"]


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
            broken.append(target)
    assert broken == []


def test_the_anchor_of_a_heading_is_githubs():
    assert _slug("verl 0.9 runs: resource pools, evaluation and loggers") == (
        "verl-09-runs-resource-pools-evaluation-and-loggers"
    )
    assert _slug("Operations: where to look") == "operations-where-to-look"
