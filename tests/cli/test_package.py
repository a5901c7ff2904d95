"""The CLI installs on a laptop: no Django, no Ray, nothing of the service."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "cli"


def test_it_depends_on_no_part_of_the_service():
    project = tomllib.loads((CLI / "pyproject.toml").read_text())["project"]
    names = {dep.split(">")[0].split("=")[0].split("<")[0].strip().lower() for dep in project["dependencies"]}
    assert names == {"click", "rich", "httpx"}
    assert project["scripts"] == {"argus": "argus_cli.main:main"}


def test_it_imports_no_django_or_ray():
    code = (
        "import sys, argus_cli.main; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'ray', 'rest_framework', 'tasks'}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
