"""Where the command finds the server and the token: the environment, then `argus login`'s file."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import click


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Config:
    url: str
    token: str


def config_path() -> Path:
    # click knows each platform's user config folder (XDG on Linux, ~/Library on macOS).
    return Path(click.get_app_dir("argus")) / "config.json"


def saved() -> dict[str, str]:
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise ConfigError(f"Cannot read {path}: {error}. Run `argus login` again.") from error
    return {key: str(value) for key, value in data.items() if key in ("url", "token")} if isinstance(data, dict) else {}


def load() -> Config:
    """ARGUS_URL and ARGUS_TOKEN win over the saved file, so one shell can aim elsewhere."""
    stored = saved()
    url = os.environ.get("ARGUS_URL") or stored.get("url", "")
    token = os.environ.get("ARGUS_TOKEN") or stored.get("token", "")
    if not url:
        raise ConfigError("No Argus URL: set ARGUS_URL or run `argus login`.")
    if not token:
        raise ConfigError("No API token: set ARGUS_TOKEN or run `argus login`.")
    return Config(url=url.rstrip("/"), token=token)


def save(config: Config) -> Path:
    """Write the file readable by its owner only (it holds a token)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": config.url, "token": config.token}, handle)
    os.chmod(tmp, 0o600)  # O_CREAT's mode does not apply to a file left by an earlier crash
    os.replace(tmp, path)
    return path
