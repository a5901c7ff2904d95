"""The advanced-command policy: what a user's own verl command may do (SPEC §3).

An advanced spec's command runs as ``bash -c <command>`` on a worker. `check_command` holds it to
the rules below (one program, an allowed module, allowed variables, Hydra read by Hydra's own
parsers, paths the task may read or write, no credentials in plain text, the spec's resources);
`command_argv` reads a checked command back as Hydra will. `secret_env_refusal` says which
environment variables a secret may become, by the same allow-list a command's variables have.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

from django.conf import settings

from accounts.homes import home_dir
from tasks.choices import Tracker
from tasks.jobvars import set_by_argus
from tasks.specs import hydra_argv, paths, pools, verl_names

# What a malicious user could try, and what closes it. The command runs as `bash -c <command>`,
# so the threat is shell syntax that runs a second program, or builds a word the checks cannot
# see. The rules below are deliberately blunt (refused even inside quotes, where some would be
# harmless): a shell parser of our own that disagreed with bash in one corner would be a hole.
#
# - Chaining and substitution: `;` `&` `|` (so `&&`, `||`, pipes, background jobs), backticks,
#   `<` `>` (redirections, process substitution, here-documents) are refused outright. Argus keeps
#   the whole output in driver.log, so redirections have no legitimate use.
# - Lines: a backslash is allowed only as a line continuation; any other line break starts a
#   new command and is refused. `\\` before a newline would end a continuation early and `#`
#   comments swallow a trailing `\` (bash then starts a new command on the next line), so
#   other backslashes and `#` at the start of a word are refused too. Control characters (`\r`
#   among them) are refused.
# - Expansions: after the $HOME macros, no `$` may remain. `$(…)` and `$((…))` run code;
#   `$VAR` and Hydra's `${oc.env:…}` could assemble another user's path out of pieces that each
#   look innocent. Globs (`*`, `?`, and `[`, `{` inside a path) expand to names never checked,
#   and `~` expands to the worker's home, not the user's Argus home.
# - Entry: the command must be `[VAR=value …] python3 -m <module>` with an allowed module.
#   The variables are an allow-list (_ENV_NAMES, _ENV_PREFIXES): almost any other one changes
#   which code runs. PATH (bash looks `python3` up through it), LD_* (preloaded libraries),
#   PYTHONPATH (a module of the user's named `verl.trainer.main_ppo`), HOME (Python's user site
#   in it imports uploaded `.pth` files), PYTHONWARNINGS (`ignore::mod.W` imports `mod`),
#   PYTHONINSPECT, BASH_ENV, …: a deny-list is always one name short.
# - Hydra: the arguments are read by Hydra's own parsers (tasks.specs.hydra_argv), so a group value
#   (`trainer={nnodes:4}`), a list or a quoted string is checked leaf by leaf like a dotted key.
#   Sweeps and `--multirun` (one task launching many runs), Hydra's own settings but the output
#   folders (callbacks, launchers, sweepers and search paths load code or configs from anywhere)
#   and `key@package=` overrides are refused; `--config-path`/`--config-dir` must be a relative
#   path (inside the trainer's package) or a folder the task may read.
# - Paths: every absolute path in any argument is checked against other users' homes, as
#   written and with symlinks resolved; `..` components are refused anywhere. Input overrides
#   (data files, model paths) must be allowed, existing paths; reward files must be under the
#   owner's $HOME/code/; output folders (_OUTPUT_KEYS and every `*_dir`) under $HOME/jobs/.
#
# What string checks cannot close: a custom reward function is the user's own Python, run by
# verl with the worker's permissions, and can read whatever the worker can. Stopping that needs
# per-user identities (uids, containers) on the workers; seed 003 accepts this for trusted users.

_FORBIDDEN_CHARS = {
    ";": "';' (runs another command)",
    "&": "'&' (&&, background jobs and &> run or hide other commands)",
    "|": "'|' (pipes and || run other programs)",
    "`": "backticks (command substitution)",
    "<": "'<' (redirection, process substitution)",
    ">": "'>' (redirection, process substitution; the output is kept in driver.log anyway)",
    "*": "'*' (a glob expands to paths that cannot be checked)",
    "?": "'?' (a glob expands to paths that cannot be checked)",
}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ASSIGNMENT = re.compile(r"""([A-Za-z_][A-Za-z0-9_]*)=(?:'[^']*'|"[^"]*"|[^\s'"])*\s+""")
_ENTRY = re.compile(r"(python3?)\s+-m\s+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\s|$)")
# The variables verl users set to tune and log a run (NCCL, CUDA, vLLM, PyTorch, W&B, SwanLab, the HF hub).
_ENV_NAMES = frozenset(
    {
        "PYTHONUNBUFFERED",
        "PYTHONHASHSEED",
        "PYTHONFAULTHANDLER",
        "HYDRA_FULL_ERROR",
        "TOKENIZERS_PARALLELISM",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    }
)
_ENV_PREFIXES = ("NCCL_", "CUDA_", "VLLM_", "TORCH_", "PYTORCH_", "WANDB_", "SWANLAB_", "HF_")
# NCCL_NET_PLUGIN and the like load a shared library or module by name.
_ENV_REFUSED_WORD = "PLUGIN"
# A variable with such a name holds a place (HF_HOME, WANDB_DIR, TORCH_EXTENSIONS_DIR): it must
# be an absolute path the task may read, never a relative one resolved on the worker.
_ENV_PATH_SUFFIXES = ("_HOME", "_DIR", "_PATH", "_CACHE", "_FILE", "_ROOT")
# `..` as a whole path component, wherever a path may start or end inside an argument.
_PARENT = re.compile(r"""(?:^|(?<=[/=:,\['"]))\.\.(?=$|[/,\]'"])""")
# An absolute path inside an argument: after `=`, `:`, `,`, `[`, a quote or the word start (not
# after a name character, which makes it a relative path such as `Qwen/Qwen2.5`).
_ABSOLUTE = re.compile(r"""(?<![\w.~-])/[^\s'",\]}]*""")
_TILDE = re.compile(r"(?:^|[=:])~(?:[\w.-]*/|$)")
_DATA_KEYS = (verl_names.TRAIN_FILES, verl_names.VAL_FILES)
_MODEL_KEYS = (verl_names.ACTOR_MODEL_PATH, verl_names.CRITIC_MODEL_PATH, verl_names.SFT_MODEL_PATH)
# Where a run writes. Besides these, every key whose last part is `dir` or ends in `_dir`
# (verl's rollout_data_dir, validation_data_dir, default_hdfs_dir, cache_dir…) is an output.
_OUTPUT_KEYS = (verl_names.LOCAL_DIR, "hydra.run.dir", "hydra.sweep.dir")
_OUTPUT_NAMES = ("save_path",)
# Hydra's own settings a command may change: where it writes, and how much it logs. The rest
# (callbacks, launcher, sweeper, searchpath, job_logging handlers…) loads code or configs.
_HYDRA_ALLOWED: tuple[str, ...] = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.output_subdir")
_HYDRA_ALLOWED += ("hydra.job.chdir", "hydra.job.name", "hydra.verbose")
_HYDRA_GROUPS_ALLOWED = ("hydra/job_logging", "hydra/hydra_logging")
# Sub-folders Hydra joins to an output folder: a relative name keeps them inside it.
_HYDRA_SUBDIRS = ("hydra.sweep.subdir", "hydra.output_subdir")


def command_argv(command: str) -> tuple[str, hydra_argv.HydraArgv] | None:
    """An advanced command's module and its arguments, read as Hydra will read them. ``command``
    was checked when the task was submitted; None when it cannot be read."""
    try:
        tokens = shlex.split(command.replace("\\\n", ""))
    except ValueError:
        return None
    start = 0
    while start < len(tokens) and _ASSIGNMENT.match(tokens[start] + " "):
        start += 1
    if len(tokens) < start + 3:
        return None
    return tokens[start + 2], hydra_argv.parse(tokens[start + 3 :])  # past python3 -m <module>


def command_trackers(command: str) -> list[str]:
    """The trackers (Tracker values) an advanced command's trainer.logger names, read as Hydra will
    read it (``trainer.logger=['console','wandb']``, ``trainer.logger=wandb``); one that cannot be
    read names none."""
    read = command_argv(command)
    named = {str(value) for value in read[1].values(verl_names.LOGGER)} if read else set()
    return [tracker for tracker in Tracker.values if tracker in named]


def _module_allowed(module: str, prefixes: Iterable[str]) -> bool:
    # "verl.trainer." allows verl.trainer.*; a prefix without the dot must not let
    # "verl.trainerevil" through.
    return any(module.startswith(p) if p.endswith(".") else module == p or module.startswith(p + ".") for p in prefixes)


def _brace_expanded(command: str) -> bool:
    """True when bash would brace-expand part of ``command``: an unquoted `{` whose matching
    unquoted `}` encloses, at its own level, an unquoted `,` or `..` (shlex does not expand)."""
    quote = ""
    opened: list[int] = []  # for each open brace: 0, or 1 once a `,` or `..` is seen in it
    previous = ""
    for char in command:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "{":
            opened.append(0)
        elif char == "}" and opened:
            if opened.pop():
                return True
        elif opened and (char == "," or (char == "." and previous == ".")):
            opened[-1] = 1
        previous = char if not quote else ""
    return False


def _env_allowed(name: str) -> bool:
    return (name in _ENV_NAMES or name.startswith(_ENV_PREFIXES)) and _ENV_REFUSED_WORD not in name


# A variable that holds a credential, by its name: *_KEY, *_TOKEN, *_SECRET, *PASSWORD*. In a
# command it would be stored, shown and sent to Ray in plain text: it goes in `secrets:` instead.
_CREDENTIAL = re.compile(r"(?:_KEY|_TOKEN|_SECRET)$|PASSWORD")
# Namespaces no secret may enter: Argus's own settings, and Ray's (RAY_ADDRESS, RAY_AUTH_TOKEN…
# configure the job's connection to Ray). What Argus sets in a job is declared in tasks.jobvars.
_RESERVED_PREFIXES = ("ARGUS_", "RAY_")
POINT_TO_SECRETS = (
    "store it as a secret (argus secret set {name}, or your account page) and name it in the spec's "
    "secrets: [{name}]: a value in a command is stored, shown and sent to Ray in plain text"
)


def is_credential_name(name: str) -> bool:
    return _CREDENTIAL.search(name.upper()) is not None


def secret_env_refusal(name: str) -> str | None:
    """Why a job may not get secret ``name`` as an environment variable; None when it may.

    Credential names, and the variables a command may set (tuning and tracker settings), but none
    that names a place (HF_HOME: a path no check has seen) and none Argus sets itself (a
    secret's value would replace it). Anything else (PATH, LD_PRELOAD, PYTHONPATH…) would change
    which code runs, as in a command."""
    if set_by_argus(name):
        return f"{name}: Argus sets this variable itself"
    if name.startswith(_RESERVED_PREFIXES):
        return f"{name}: the {' and '.join(p + '…' for p in _RESERVED_PREFIXES)} variables are Argus's and Ray's own"
    if is_credential_name(name):
        return None
    if _env_allowed(name) and not name.endswith(_ENV_PATH_SUFFIXES):
        return None
    return (
        f"{name} cannot be given to a job: a secret's name must end in _KEY, _TOKEN or _SECRET (or hold "
        f"PASSWORD), or be one a command may set ({', '.join(_ENV_PREFIXES)}…, not a *_HOME/_DIR/_PATH)"
    )


def _is_hydra(key: str) -> bool:
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


def _is_read_path(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return not _is_output(key) and (last == "path" or last.endswith("_path"))


def _is_output(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return key in _OUTPUT_KEYS or last in _OUTPUT_NAMES or last == "dir" or last.endswith("_dir")


class _CommandCheck:
    """The checks on an advanced command whose macros are already expanded."""

    def __init__(
        self, command: str, username: str, nnodes: int | None, n_gpus: int | None, pending: Sequence[Path] = ()
    ) -> None:
        self.username = username
        self.pending = tuple(pending)
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.argv: hydra_argv.HydraArgv | None = None
        self.module = ""
        tokens = self._syntax(command)
        if tokens is None:
            return
        for token in tokens:
            self._paths_in(token)
        arguments = self._entry(command.replace("\\\n", ""), tokens)
        if arguments is None:
            return
        argv = hydra_argv.parse(arguments)
        self.argv = argv
        self.errors.extend(argv.errors)
        self._credentials(argv)
        self._hydra(argv)
        self._inputs(argv)
        self._outputs(argv)
        self._resources(argv, verl_names.NNODES, "nnodes", nnodes)
        self._resources(argv, verl_names.N_GPUS_PER_NODE, "n_gpus_per_node", n_gpus)
        self.errors.extend(pools.command_pools(self.module, argv)[1])
        if argv.errors:
            return  # the warnings below would only repeat that the arguments cannot be read
        if not argv.values(verl_names.TRAIN_FILES):
            self.warnings.append(
                f"The command sets no {verl_names.TRAIN_FILES}=…: verl will use its default dataset path."
            )
        if "auto" not in argv.values(verl_names.RAY_ADDRESS):
            self.warnings.append(
                f"The command lacks +{verl_names.RAY_ADDRESS}=auto: verl may start a Ray "
                "instance of its own instead of joining the cluster."
            )

    def writes_under(self, folder: Path) -> bool:
        """Whether verl's checkpoints (trainer.default_local_dir) go into ``folder``."""
        if self.argv is None:
            return False
        values = [str(value) for value in self.argv.values(verl_names.LOCAL_DIR)]
        return any(value == str(folder) or value.startswith(f"{folder}/") for value in values)

    def _syntax(self, command: str) -> list[str] | None:
        """Shell-level rules; returns the words bash will pass, or None when they cannot be trusted."""
        if _CONTROL.search(command):
            self.errors.append("contains control characters (only spaces, tabs and line breaks are allowed)")
            return None
        found = [why for char, why in _FORBIDDEN_CHARS.items() if char in command]
        if found:
            self.errors.append("must run a single program; it contains " + ", ".join(found))
        if "$" in command:
            self.errors.append(
                "may use no $ expansion but $HOME and ${HOME} ($VAR, $(…) and Hydra's ${…} "
                "are refused: they can build values that cannot be checked)"
            )
        if re.search(r"\\(?!\n)", command):
            self.errors.append("may use a backslash only at the end of a line, to continue it")
        # Exactly what bash does with a line continuation outside single quotes: remove it.
        joined = command.replace("\\\n", "")
        if "\n" in joined:
            self.errors.append("is several commands: every line but the last must end with a backslash")
        try:
            tokens = shlex.split(joined)
        except ValueError as exc:
            self.errors.append(f"cannot be split into words: {exc}")
            return None
        if any(token.startswith("#") for token in tokens):
            self.errors.append("may not contain comments (a # comment can hide a line continuation)")
        if _brace_expanded(joined):
            self.errors.append(
                "has a word bash would expand {…} into several words ({a,b}, {1..9}); quote a Hydra "
                "group value with several keys: 'trainer={nnodes:1,n_gpus_per_node:4}'"
            )
        return tokens

    def _entry(self, joined: str, tokens: list[str]) -> list[str] | None:
        """Check `[VAR=value …] python3 -m <module>`; returns the module's arguments (None: no entry)."""
        pos = len(joined) - len(joined.lstrip())
        assignments = 0
        while match := _ASSIGNMENT.match(joined, pos):
            assignments += 1
            self._variable(tokens[assignments - 1])
            pos = match.end()
        entry = _ENTRY.match(joined, pos)
        allowed = list(settings.ARGUS_ADVANCED_ALLOWED_MODULES)
        if entry is None:
            self.errors.append(
                "must start with python3 -m <module> (optionally after VAR=value assignments), "
                f"where the module starts with {' or '.join(allowed)}"
            )
            return None
        self.module = entry.group(2)
        if not _module_allowed(entry.group(2), allowed):
            self.errors.append(f"runs module {entry.group(2)!r}; allowed modules start with {' or '.join(allowed)}")
        # Each assignment is one word, as are python3, -m and the module (the patterns hold no quotes there).
        return tokens[assignments + 3 :]

    def _variable(self, word: str) -> None:
        name, _, value = word.partition("=")
        if is_credential_name(name):
            self.errors.append(f"may not set {name} in the command: {POINT_TO_SECRETS.format(name=name)}")
        elif not _env_allowed(name):
            self.errors.append(
                f"may not set {name}: only {', '.join(sorted(_ENV_NAMES))} and {', '.join(_ENV_PREFIXES)}… "
                f"variables (no *{_ENV_REFUSED_WORD}*) may be set; others change which program or code runs"
            )
        elif name.endswith(_ENV_PATH_SUFFIXES) and value:
            self._input(name, value, within=None, exists=False)

    def _paths_in(self, token: str) -> None:
        if _PARENT.search(token):
            self.errors.append("may not contain '..' in a path")
        if _TILDE.search(token):
            self.errors.append("may not use ~ paths: they expand to the worker's home; use $HOME")
        for path in _ABSOLUTE.findall(token):
            if any(char in path for char in "[{}"):
                self.errors.append(f"path {path!r} contains glob or brace characters")
            elif paths.other_user_home(paths.normalise(path), self.username):
                self.errors.append(f"path {path!r} is in another user's home")

    def _credentials(self, argv: hydra_argv.HydraArgv) -> None:
        """Credentials handed to Ray through Hydra (+ray_kwargs.ray_init.runtime_env.env_vars.X=…, or
        a group value naming them): refused as an inline assignment is."""
        for leaf in argv.leaves:
            parts = leaf.key.split(".")
            if "env_vars" not in parts[:-1]:
                continue
            name = parts[-1]
            if is_credential_name(name):
                self.errors.append(f"may not set {name} in {parts[0]}…env_vars: {POINT_TO_SECRETS.format(name=name)}")

    def _hydra(self, argv: hydra_argv.HydraArgv) -> None:
        if argv.multirun or argv.sweeps:
            shown = ", ".join(repr(s) for s in argv.sweeps) or "--multirun"
            self.errors.append(f"may not sweep ({shown}): a task is one run; submit one task per setting")
        if argv.experimental_rerun:
            self.errors.append("may not use --experimental-rerun: it loads a pickled file, which runs code")
        for switch, value in (("--config-path", argv.config_path), ("--config-dir", argv.config_dir)):
            # Relative: inside the trainer's own package (`..` is refused everywhere); absolute:
            # a folder the task may read.
            if value is not None and (value.startswith("/") or "://" in value):
                if value.startswith("file://"):
                    value = value.removeprefix("file://")
                if "://" in value:
                    self.errors.append(f"{switch}: {value!r} must be a folder path, not a URL")
                else:
                    self._input(switch, value, within=None, exists=False)
        for override in argv.packages:
            self.errors.append(f"{override!r}: key@package overrides are not allowed; set the keys themselves")
        for group, _ in argv.groups:
            if _is_hydra(group) and group not in _HYDRA_GROUPS_ALLOWED:
                self.errors.append(f"may not choose {group}: Hydra's launchers, sweepers and callbacks run other code")
        for key in {leaf.key for leaf in argv.leaves} | set(argv.deleted):
            if _is_hydra(key) and key not in _HYDRA_ALLOWED:
                self.errors.append(
                    f"may not set {key}: of Hydra's own settings only {', '.join(_HYDRA_ALLOWED)} may be set"
                )

    def _inputs(self, argv: hydra_argv.HydraArgv) -> None:
        for leaf in argv.leaves:
            value = leaf.value
            if leaf.key in _DATA_KEYS or leaf.key in _MODEL_KEYS:
                if value is None or not isinstance(value, str) or "://" in value:
                    continue  # unset, or a remote URL: nothing local to check
                if leaf.key in _MODEL_KEYS and paths.is_hub_id(value):
                    continue  # a hub model, fetched through the shared cache
                self._input(leaf.key, value, within=None)
            elif leaf.key == verl_names.REWARD_FUNCTION_PATH or leaf.key.endswith(
                "." + verl_names.REWARD_FUNCTION_PATH
            ):
                if value is not None:
                    self._input(leaf.key, str(value), within=[home_dir(self.username) / "code"])
            elif (
                _is_read_path(leaf.key) and isinstance(value, str) and "://" not in value and not paths.is_hub_id(value)
            ):
                # verl loads Python files and configs through many `*.path` keys (data.custom_cls.path,
                # tool and interaction configs…): they read only where the task may read.
                self._input(leaf.key, value, within=None, exists=False)

    def _input(self, key: str, value: str, within: list[Path] | None, exists: bool = True) -> None:
        try:
            path = paths.resolve_input_path(
                value, self.username, within=within, must_exist=exists, pending=self.pending
            )
        except paths.PathPolicyError as exc:
            self.errors.append(f"{key}: {exc}")
            return
        if within is not None and not path.is_file():
            self.errors.append(f"{key}: {value!r} is not a file")

    def _outputs(self, argv: hydra_argv.HydraArgv) -> None:
        for leaf in argv.leaves:
            if leaf.value is None:
                continue  # unset: verl's default, or Argus's
            value = str(leaf.value)
            if leaf.key in _HYDRA_SUBDIRS:
                if value.startswith("/") or "://" in value:
                    self.errors.append(f"{leaf.key}: {value!r} must be a name relative to the output folder")
            elif _is_output(leaf.key):
                try:
                    paths.resolve_output_path(value, self.username)
                except paths.PathPolicyError as exc:
                    self.errors.append(f"{leaf.key}: {exc}")

    def _resources(self, argv: hydra_argv.HydraArgv, key: str, field: str, wanted: int | None) -> None:
        if wanted is None:
            return  # the spec's own number is invalid and already reported
        leaves = [leaf for leaf in argv.leaves if leaf.key == key]
        if not leaves and key not in argv.deleted:
            self.warnings.append(
                f"The command sets no {key}=…: verl's default may not match {field}: {wanted}, "
                "which is what Argus reserves."
            )
            return
        if key in argv.deleted:
            self.errors.append(f"may not delete {key}: Argus reserves {field}: {wanted}")
        for leaf in leaves:
            if isinstance(leaf.value, bool) or str(leaf.value) != str(wanted):
                # Argus admits the task on the spec's numbers; a command asking for more would take
                # GPUs promised to other tasks.
                shown = leaf.override if leaf.override.startswith(key) else f"{key}={leaf.value} (in {leaf.override})"
                self.errors.append(f"sets {shown} but the spec says {field}: {wanted}")


def check_overrides(
    overrides: Sequence[str], module: str, username: str, pending: Sequence[Path] = ()
) -> tuple[list[str], hydra_argv.HydraArgv | None]:
    """The errors of a basic spec's Hydra overrides (their $HOME macros expanded), which Argus
    appends to the verl command it writes for ``module``: each is held to exactly the rules of an
    advanced command's arguments, as the words of ``python3 -m <module> <overrides>``. Also the
    arguments as Hydra reads them (None when they cannot be read), for the basic spec's own rules.
    The command's warnings are not the overrides' (Argus writes the data files, the resources and
    the checkpoint folder itself)."""
    command = " ".join(["python3", "-m", module, *(shlex.quote(override) for override in overrides)])
    checked = _CommandCheck(command, username, None, None, pending)
    return checked.errors, checked.argv


def check_command(
    expanded: str, username: str, nnodes: int | None, n_gpus: int | None, pending: Sequence[Path] = ()
) -> tuple[list[str], list[str]]:
    """The errors and warnings of an advanced command whose $HOME macros are expanded
    (paths.expand_macros), checked as it will run: with a task's checkpoint folder for
    $ARGUS_CHECKPOINT_DIR (any task's is checked the same way: it lies in the owner's jobs folder)."""
    example = home_dir(username) / "jobs" / "TASK" / "checkpoints"
    checked = _CommandCheck(paths.expand_checkpoint_macro(expanded, example), username, nnodes, n_gpus, pending)
    warnings = list(checked.warnings)
    if not checked.errors and not checked.writes_under(example):
        warnings.append(
            f"The command sets no {verl_names.LOCAL_DIR}=$ARGUS_CHECKPOINT_DIR: a retry will not resume "
            "from this task's checkpoints (each attempt starts from scratch)."
        )
    return checked.errors, warnings
