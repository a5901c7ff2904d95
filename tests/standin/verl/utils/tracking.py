"""Stand-in for verl/utils/tracking.py (verl 0.9.1): ``Tracking`` starts a logger only when
``trainer.logger`` lists it (default ``["console", "wandb"]``, as ppo_trainer.yaml and
sft_trainer_engine.yaml), and ``log(data, step)`` hands each step's metrics to every one:

- ``console``: verl's ``LocalLogger``, one line ``step:N - key:value - …`` of the numeric values
  (``concat_dict_to_str``: ``pprint.pformat`` of each, so numpy 2 values read ``np.float64(…)``);
- ``file``: verl's ``FileLogger``, one JSON line ``{"step": N, "data": {…}}`` per call, to
  ``VERL_FILE_LOGGER_PATH``, else ``VERL_FILE_LOGGER_ROOT`` (default ``.``)/project/experiment.jsonl;
  it prints ``Creating file logger at <path>`` and opens the file with mode ``wb``, unbuffered
  (each start truncates it). verl writes with orjson (numpy values as numbers, NaN as null,
  no spaces), here json does the same;
- ``wandb``: no W&B here; it prints what W&B prints once its run starts (wandb.init reads
  WANDB_RUN_ID from the environment; a random id without it).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import pprint
import random
from typing import Any, BinaryIO

# verl 0.9.1's Tracking.supported_backend.
SUPPORTED = ["wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "console", "clearml", "trackio", "file"]
SUPPORTED += ["rl_insight"]
DEFAULT = ["console", "wandb"]


def backends(value: str | None) -> list[str]:
    """``trainer.logger`` as Hydra reads the override: ``['console','wandb']``, ``[console]`` or
    ``console`` (a string, which verl wraps in a list); verl's default when it is not set."""
    if value is None:
        return list(DEFAULT)
    value = value.strip()
    if not value.startswith("["):
        return [value.strip("'\"")]
    inner = value[1:-1].strip()
    return [name.strip().strip("'\"") for name in inner.split(",")] if inner else []


def concat_dict_to_str(data: dict[str, Any], step: int) -> str:
    """verl/utils/logger/aggregate_logger.py."""
    output = [f"step:{step}"]
    for k, v in data.items():
        if isinstance(v, numbers.Number):
            output.append(f"{k}:{pprint.pformat(v)}")
    return " - ".join(output)


class FileLogger:
    def __init__(self, project_name: str, experiment_name: str) -> None:
        path = os.getenv("VERL_FILE_LOGGER_PATH")
        if path is None:
            directory = os.path.join(os.path.expanduser(os.getenv("VERL_FILE_LOGGER_ROOT", ".")), project_name)
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, f"{experiment_name}.jsonl")
        print(f"Creating file logger at {os.path.abspath(path)}", flush=True)
        self.fp: BinaryIO = open(path, "wb", buffering=0)  # noqa: SIM115 (verl keeps it open)

    def log(self, data: dict[str, Any], step: int) -> None:
        line = json.dumps({"step": step, "data": {k: _plain(v) for k, v in data.items()}}, separators=(",", ":"))
        self.fp.write(line.encode() + b"\n")


def _plain(value: Any) -> Any:
    """What orjson's OPT_SERIALIZE_NUMPY writes: numpy scalars as numbers, NaN and infinities as null."""
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and not math.isfinite(value) else value


class ConsoleLogger:
    def log(self, data: dict[str, Any], step: int) -> None:
        print(concat_dict_to_str(data, step), flush=True)


class Tracking:
    def __init__(self, project_name: str, experiment_name: str, default_backend: list[str]) -> None:
        for backend in default_backend:
            assert backend in SUPPORTED, f"{backend} is not supported"
        self.logger: dict[str, ConsoleLogger | FileLogger] = {}
        if "wandb" in default_backend:
            run_id = os.environ.get("WANDB_RUN_ID") or f"{random.getrandbits(32):08x}"
            print(f"wandb: Syncing run {experiment_name}", flush=True)
            print(f"wandb: \u2b50\ufe0f View project at https://wandb.ai/standin/{project_name}", flush=True)
            url = f"https://wandb.ai/standin/{project_name}/runs/{run_id}"
            print(f"wandb: \U0001f680 View run at \x1b[34m\x1b[4m{url}\x1b[0m", flush=True)
        if "console" in default_backend:
            self.logger["console"] = ConsoleLogger()
        if "file" in default_backend:
            self.logger["file"] = FileLogger(project_name, experiment_name)

    @classmethod
    def from_config(cls, config: dict[str, str], project: str, experiment: str) -> Tracking:
        """As verl's trainers make it from trainer.project_name, experiment_name and logger."""
        return cls(
            config.get("trainer.project_name", project),
            config.get("trainer.experiment_name", experiment),
            backends(config.get("trainer.logger")),
        )

    def log(self, data: dict[str, Any], step: int) -> None:
        for logger in self.logger.values():
            logger.log(data=data, step=step)
