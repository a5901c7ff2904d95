"""How verl will log and save a run, read from the command Argus sends (tasks.specs.builders),
before it runs: what its progress can be judged on once it ends (tasks.scheduler.progress).

verl 0.9.1's ``Tracking`` (verl/utils/tracking.py) starts a logger only when ``trainer.logger``
lists it: ``console`` prints the ``step:N - …`` lines, ``file`` writes one JSON line per logged
step (``{"step": N, "data": {…}}``) to ``VERL_FILE_LOGGER_PATH``, which Argus sets to a file of
the attempt's own (tasks.scheduler.job_env). So Argus adds ``file`` to every logger list it
knows: the lists it builds (basic specs), and an advanced command's own explicit
``trainer.logger=…``, whose trackers stay the user's (the file is local, in the attempt's
folder). A command that sets no ``trainer.logger`` is left alone: its list comes from verl's
config (``["console", "wandb"]`` in 0.9.1's ppo_trainer.yaml, or a ``--config-name`` of the
user's), which Argus does not read, and writing one would change the user's trackers whenever
that config is not verl's default.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.specs import hydra_argv
from tasks.specs import verl_names as verl
from tasks.specs.advanced import command_argv

CONSOLE = "console"
FILE = "file"
# A logger's name as verl spells its backends ("wandb", "vemlp_wandb"): only lists of such names
# are rewritten, so the list Argus writes back is the one Hydra read.
_NAME = re.compile(r"\w+")
# What may end a command after its last word: spaces, line breaks, line continuations.
_TRAILING = re.compile(r"(?:\s|\\\n)+\Z")


@dataclass(frozen=True)
class RunFacts:
    """What a run's command says of its progress records.

    ``loggers``: its trainer.logger list (None: left to verl's config). ``validates_only``:
    ``trainer.val_only=True`` with ``trainer.val_before_train`` on (verl's fit() then validates,
    logs the step it starts at and returns; with val_before_train=False, val_only does nothing).
    ``saves_last_step``: verl saves a checkpoint of its last step into ``checkpoint_dir`` (PPO with
    ``save_freq`` > 0, ``is_last_step`` in ray_trainer.py and v1/trainer_base.py; SFT always),
    so a tracker below the total after the end says the last step was never reached.
    """

    loggers: tuple[str, ...] | None = None
    validates_only: bool = False
    saves_last_step: bool = False

    @property
    def console(self) -> bool:
        return self.loggers is not None and CONSOLE in self.loggers


def basic_loggers(trackers: Sequence[str]) -> list[str]:
    """The logger list of a run Argus builds: the console, the spec's trackers, the file."""
    return [CONSOLE, *trackers, FILE]


def with_file_logger(command: str) -> str:
    """``command`` with ``file`` added to the trainer.logger list it sets, by one more override
    after its own (Hydra applies the last); unchanged when it sets none, already lists ``file``,
    or names something that is no logger's name (verl will refuse it anyway)."""
    read = command_argv(command)
    names = [str(name) for name in _last(read[1], verl.LOGGER)] if read else []
    if not names or FILE in names or not all(_NAME.fullmatch(name) for name in names):
        return command
    listed = ",".join(f'"{name}"' for name in [*names, FILE])
    return f"{_TRAILING.sub('', command)} {shlex.quote(f'{verl.LOGGER}=[{listed}]')}"


def facts(argv: list[str], checkpoint_dir: Path) -> RunFacts:
    """What ``argv`` (build_argv's: ``python3 -m <module> …``, or an advanced command's ``env …
    bash -c <command>``) says, checkpointing into ``checkpoint_dir`` when it does."""
    if argv[:1] == ["env"]:
        read = command_argv(argv[-1])
    elif argv[:2] == ["python3", "-m"] and argv[2:3] in ([verl.PPO_MODULE], [verl.SFT_MODULE]):
        read = argv[2], hydra_argv.parse(argv[3:])
    else:
        read = None  # not a trainer (an export): no steps to judge
    if read is None:
        return RunFacts()
    module, args = read
    named = _last(args, verl.LOGGER)
    loggers = tuple(str(name) for name in named) if named else None
    validates_only = _value(args, verl.VAL_ONLY, False) is True
    validates_only = validates_only and _value(args, verl.VAL_BEFORE_TRAIN, True) is not False
    folder = _value(args, verl.LOCAL_DIR, None)
    into_task = folder is not None and Path(str(folder)) == Path(checkpoint_dir)
    save_freq = _value(args, verl.SAVE_FREQ, -1)
    saves = module == verl.SFT_MODULE or (module == verl.PPO_MODULE and isinstance(save_freq, int) and save_freq > 0)
    return RunFacts(loggers, validates_only, into_task and saves)


def _last(args: hydra_argv.HydraArgv, key: str) -> list[object]:
    """The values of the last override that sets ``key`` (Hydra applies overrides in order)."""
    leaves = [leaf for leaf in args.leaves if leaf.key == key]
    return [leaf.value for leaf in leaves if leaf.override == leaves[-1].override] if leaves else []


def _value(args: hydra_argv.HydraArgv, key: str, default: object) -> object:
    values = _last(args, key)
    return values[-1] if values else default
