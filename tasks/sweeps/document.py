"""Sweep documents: parse one, expand its trials and check each trial's spec.

A document (issue 29)::

    name: lr-sweep                  # optional: up to 64 letters, digits, '.', '_' or '-'
    base: {…}                       # a task spec, basic or advanced, without after / after_any
    grid:                           # every combination is a trial: the first key's values
      actor_rollout_ref.actor.optim.lr: [1.0e-6, 3.0e-6]   # outermost, each key's in the order given
      data.train_batch_size: [256, 512]
    random:                         # or, instead of grid: sampled trials
      samples: 8                    # how many trials
      seed: 1                       # optional (0): the same seed draws the same trials
      space:                        # each key's distribution, drawn in the order given:
        actor_rollout_ref.actor.optim.lr: {loguniform: [1.0e-7, 1.0e-5]}   # 0 < lo < hi
        actor_rollout_ref.actor.entropy_coeff: {uniform: [0.0, 0.01]}     # lo < hi
        data.train_batch_size: {randint: [128, 512]}                      # integers, both ends included
        algorithm.kl_ctrl.kl_coef: {choice: [0.001, 0.01]}                # one of the values
    max_concurrent: 2               # optional: at most this many trials admitted at once
    early_stop:                     # optional
      metric: val-core/openai/gsm8k/acc/mean@1   # what trials are compared on (the best trial)
      mode: max                     # max (default) or min: which way is better
      min_steps: 10                 # the first rung; without it no trial is stopped
      eta: 2                        # default 2: rungs at min_steps x eta^k, the top 1/eta go on

A key that is a spec key (tasks.specs.keys.SPEC_KEY: model_id, n_gpus_per_node, …) sets that key
of the trial's spec; any other is a Hydra override, added to the base's ``overrides`` (basic) or
to its ``command`` (advanced) and checked exactly as an advanced command's overrides are. A float
drawn by random is kept to 6 significant digits (what a person reads in the trial's params).

``parse_sweep`` is the entry point. Like parse_spec and parse_pipeline it collects every problem
into one SpecError, by field: ``grid.<key>`` / ``random.space.<key>`` for a swept key (naming the
trial whose spec it breaks), ``base.<key>`` for the base's own.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeGuard

from django.conf import settings
from django.contrib.auth.models import User

from tasks.choices import TaskKind
from tasks.pipelines.document import PIPELINE_NAME
from tasks.specs import advanced, hydra_argv, pools, verl_names
from tasks.specs.checks import shown, type_name
from tasks.specs.errors import Problems, SpecError
from tasks.specs.hydra_argv import HydraArgv
from tasks.specs.keys import SPEC_KEY
from tasks.specs.parse import ParsedSpec, parse_spec
from tasks.specs.rules import BEST_MODES, METRIC_NAME, set_by_argus
from tasks.specs.yaml_load import load_document

DOCUMENT_KEYS = ("name", "base", "grid", "random", "max_concurrent", "early_stop")
RANDOM_KEYS = ("samples", "seed", "space")
EARLY_STOP_KEYS = ("metric", "mode", "min_steps", "eta")
DISTRIBUTIONS = ("loguniform", "uniform", "randint", "choice")
DEFAULT_ETA = 2
DEFAULT_SEED = 0
# Bounds no real sweep reaches; they keep absurd numbers out of the rungs' arithmetic.
MAX_ETA = 100
MAX_MIN_STEPS = 100_000_000
MAX_SEED = 2**63 - 1
# A swept override's integers and a distribution's bounds: 64 bits, as verl's config holds them.
MAX_BITS = 64
# A Hydra key a trial may override: dotted names, `+` to add one verl's config lacks, `++` to
# add or override.
HYDRA_KEY = re.compile(r"\+{0,2}[A-Za-z_][\w-]*(?:\.[\w-]+)*")
# A string Hydra reads bare as itself (a model id, a name); any other is quoted. Its words that
# read as other values (tasks.specs.hydra_argv reads them as Hydra does).
BARE_STRING = re.compile(r"[A-Za-z_][\w./-]*")
HYDRA_WORDS = frozenset({"true", "false", "null", "nan", "inf"})
# Significant digits a random float keeps.
RANDOM_DIGITS = 6
# The keys a base may not have: a trial waits only for its sweep's cap.
DEPENDENCY_KEYS = ("after", "after_any")
MAX_TRIALS_SETTING = "ARGUS_SWEEP_MAX_TRIALS"
# verl's validation metrics: val-core/…, val-aux/… (PPO, GRPO), val/loss (SFT).
VALIDATION_PREFIX = "val"
# How verl 0.9.1 names its validation metrics: PPO's _validate (trainer/ppo/v1/trainer_base.py:
# val-core|val-aux/<data source>/<variable>/<metric>, and val-aux/num_turns/min|max|mean), SFT's fit.
PPO_VALIDATION = re.compile(r"val-(core|aux)(/[^/]+){2,}")
SFT_VALIDATION = "val/loss"

Params = dict[str, Any]


@dataclass(frozen=True)
class Trial:
    index: int  # 0-based, in grid order (random: the samples' order)
    params: Params  # {key: value} as the document names them
    parsed: ParsedSpec


@dataclass(frozen=True)
class SweepDocument:
    name: str
    raw: str
    max_concurrent: int | None  # None: no cap
    metric: str  # "": none
    mode: str  # tasks.sweeps.models.Mode
    early_stop: dict[str, int]  # {"min_steps", "eta"}; {}: no early stopping
    trials: list[Trial]
    section: str  # where the swept keys are: "grid" or "random.space" (the fields of its problems)


def is_sweep_document(source: bytes | str | dict[str, Any]) -> bool:
    """Whether ``source`` is a sweep document (a mapping with base, grid or random) rather than a
    task spec or a pipeline: what the CLI and the new-task page send it to. A document that does
    not load is not one: the task spec's checks then say what is wrong with it."""
    try:
        _, data = load_document(source)
    except SpecError:
        return False
    return isinstance(data, dict) and "steps" not in data and any(key in data for key in ("base", "grid", "random"))


def describe_params(params: Params) -> str:
    """A trial's params as its messages name them: ``lr=1e-06, data.train_batch_size=256``."""
    return ", ".join(f"{key}={_written(value)}" for key, value in params.items())


def _written(value: object) -> str:
    """``str(value)``; a value holding an integer too long for Python to write out (a spec key's
    swept value: parse_spec refuses it) by its size."""
    if isinstance(value, int) and not isinstance(value, bool):
        return shown(value)
    try:
        return str(value)
    except ValueError:
        return "(a value holding an integer too long to write out)"


def _quoted(value: object) -> str:
    """A value as a refusal quotes it: its repr, cut short (a document holds up to 64 KiB)."""
    if isinstance(value, str):
        return repr(value[:80])
    return _written(value) if isinstance(value, int) or not isinstance(value, list | dict) else type_name(value)


def _field(section: str, key: str) -> str:
    """A swept key's field: ``grid.<key>`` or ``random.space.<key>``."""
    return f"{section}.{key}"


def parse_sweep(source: bytes | str | dict[str, Any], *, user: User) -> SweepDocument:
    """Parse and validate a whole sweep document for ``user``; raise SpecError naming every
    problem. In stages, each on what the one before found: the document's keys, the base, the
    grid or random space and the other settings; each swept override's values; then each trial's
    spec, checked by parse_spec as any task's."""
    raw, data = load_document(source)
    if not isinstance(data, dict):
        raise SpecError({"spec": ["must be a mapping with base and grid (or random)"]})
    problems = Problems()
    for key in data:
        if key not in DOCUMENT_KEYS:
            problems.add(str(key), f"unknown key; a sweep has {', '.join(DOCUMENT_KEYS)} (a spec's keys go in base)")
    name = _name(data.get("name"), problems)
    base = _base(data.get("base"), "base" in data, problems)
    section, trials_params = _trials(data, problems)
    max_concurrent = _max_concurrent(data.get("max_concurrent"), problems)
    metric, mode, early_stop = _early_stop(data.get("early_stop"), problems)
    problems.raise_any()
    assert base is not None
    _swept_overrides(base, section, trials_params, user.username, problems)
    problems.raise_any()
    validated = metric if early_stop and metric.startswith(VALIDATION_PREFIX) else None
    trials = _trial_specs(base, section, trials_params, user.username, problems, validated)
    problems.raise_any()
    _rungs_reached(trials, early_stop, problems)
    _metric_logged(metric, _module(base), problems)
    problems.raise_any()
    return SweepDocument(
        name=name,
        raw=raw,
        max_concurrent=max_concurrent,
        metric=metric,
        mode=mode,
        early_stop=early_stop,
        trials=trials,
        section=section,
    )


def _name(name: object, problems: Problems) -> str:
    if name is None:
        return ""
    if not isinstance(name, str) or not PIPELINE_NAME.fullmatch(name):
        problems.add("name", "must be up to 64 letters, digits, '.', '_' or '-'")
        return ""
    return name


def _base(base: object, present: bool, problems: Problems) -> dict[str, Any] | None:
    if not isinstance(base, dict):
        problems.add(
            "base",
            "is required: the task spec every trial starts from" if not present else "must be a task spec (a mapping)",
        )
        return None
    for key in DEPENDENCY_KEYS:
        if base.get(key) is not None:
            problems.add(f"base.{key}", "a sweep's trials wait only for its max_concurrent, not for other tasks")
    return base


def _max_trials() -> int:
    return int(settings.ARGUS_SWEEP_MAX_TRIALS)


def _trials(data: dict[str, Any], problems: Problems) -> tuple[str, list[Params]]:
    """Which section sweeps (grid or random.space) and each trial's params, in trial order."""
    grid, sampled = data.get("grid"), data.get("random")
    if grid is not None and sampled is not None:
        problems.add("random", "a sweep has grid (every combination) or random (sampled trials), not both")
        return "grid", []
    if grid is not None:
        return "grid", _grid(grid, problems)
    if sampled is not None:
        return "random.space", _random(sampled, problems)
    problems.add("grid", "is required (every combination of its values is a trial), or random (sampled trials)")
    return "grid", []


def _grid(grid: object, problems: Problems) -> list[Params]:
    if not isinstance(grid, dict) or not grid:
        problems.add(
            "grid", "must map one or more keys to lists of values: {actor_rollout_ref.actor.optim.lr: [1e-6, 3e-6]}"
        )
        return []
    ok = True
    for key, values in grid.items():
        field = _field("grid", str(key))
        ok = _key(key, "grid", problems) and ok
        if not isinstance(values, list) or not values:
            problems.add(field, "must be a list of one or more values")
            ok = False
            continue
        # Of one type: True == 1 and 1.0 == 1 in Python, but Hydra (and a spec) tell them apart.
        doubled = [value for i, value in enumerate(values) if any(_same(value, other) for other in values[:i])]
        if doubled:
            problems.add(field, f"names {_quoted(doubled[0])} more than once: two trials would be the same")
            ok = False
        ok = _values(key, values, "grid", problems) and ok
    if not ok:
        return []
    count = math.prod(len(values) for values in grid.values())
    if count > _max_trials():
        problems.add("grid", f"makes {count} trials; at most {_max_trials()} ({MAX_TRIALS_SETTING})")
        return []
    keys = list(grid)
    return [dict(zip(keys, combination, strict=True)) for combination in itertools.product(*grid.values())]


def _same(value: object, other: object) -> bool:
    return type(value) is type(other) and value == other


def _random(sampled: object, problems: Problems) -> list[Params]:
    if not isinstance(sampled, dict):
        problems.add("random", "must be a mapping {samples: N, seed: S, space: {KEY: {loguniform: [lo, hi]}}}")
        return []
    for key in sampled:
        if key not in RANDOM_KEYS:
            problems.add(f"random.{key}", f"unknown key; random has {', '.join(RANDOM_KEYS)}")
    samples = _integer(
        sampled.get("samples"), "random.samples", 1, _max_trials(), problems, required=True, why=MAX_TRIALS_SETTING
    )
    seed = _integer(sampled.get("seed"), "random.seed", 0, MAX_SEED, problems, default=DEFAULT_SEED)
    space = sampled.get("space")
    if not isinstance(space, dict) or not space:
        problems.add("random.space", "must map one or more keys to a distribution: {KEY: {loguniform: [lo, hi]}}")
        return []
    draws = {key: _distribution(key, dist, problems) for key, dist in space.items()}
    if samples is None or seed is None or any(draw is None for draw in draws.values()):
        return []
    rng = random.Random(seed)
    return [{key: draw(rng) for key, draw in draws.items() if draw is not None} for _ in range(samples)]


def _distribution(key: object, dist: object, problems: Problems) -> Any:
    """How to draw ``key``'s value (a function of the generator); None when it is refused."""
    field = _field("random.space", str(key))
    if not _key(key, "random.space", problems):
        return None
    if not isinstance(dist, dict) or len(dist) != 1 or next(iter(dist)) not in DISTRIBUTIONS:
        problems.add(
            field,
            "must be one of {loguniform: [lo, hi]}, {uniform: [lo, hi]}, {randint: [lo, hi]}, {choice: [v, …]}",
        )
        return None
    kind, args = next(iter(dist.items()))
    if kind == "choice":
        if not isinstance(args, list) or not args:
            problems.add(field, "choice must be a list of one or more values")
            return None
        if not _values(key, args, "random.space", problems):
            return None
        return lambda rng: rng.choice(args)
    numbers = args if isinstance(args, list) and len(args) == 2 else None
    whole = kind == "randint"
    if numbers is None or not all(_is_number(n, whole=whole) for n in numbers):
        what = "integers" if whole else "numbers"
        problems.add(field, f"{kind} must be [lo, hi], two {what}")
        return None
    low, high = numbers
    if kind == "randint":
        if low > high:
            problems.add(field, f"randint's lo must be at most its hi, not {low} > {high}")
            return None
        return lambda rng: rng.randint(low, high)
    if not low < high or (kind == "loguniform" and low <= 0):
        floor = "0 < lo < hi" if kind == "loguniform" else "lo < hi"
        problems.add(field, f"{kind} must have {floor}, not [{low}, {high}]")
        return None
    if kind == "loguniform":
        return lambda rng: _rounded(math.exp(rng.uniform(math.log(low), math.log(high))))
    return lambda rng: _rounded(rng.uniform(low, high))


def _is_number(value: object, *, whole: bool) -> bool:
    if isinstance(value, bool):
        return False
    if _too_long(value):
        return False
    if whole:
        return isinstance(value, int)
    return isinstance(value, int | float) and math.isfinite(value)


def _rounded(value: float) -> float:
    return float(f"{value:.{RANDOM_DIGITS}g}")


def _key(key: object, section: str, problems: Problems) -> TypeGuard[str]:
    """Whether a swept key may be: a spec key (but after / after_any), or a Hydra key."""
    if not isinstance(key, str):
        problems.add(section, f"its keys must be strings, not {_quoted(key)}")
        return False
    field = _field(section, key)
    if key in DEPENDENCY_KEYS:
        problems.add(field, "a sweep's trials wait only for its max_concurrent, not for other tasks")
        return False
    if key not in SPEC_KEY and not HYDRA_KEY.fullmatch(key):
        problems.add(field, "is neither a spec key nor a Hydra key (a.b.c, or +a.b.c to add one verl lacks)")
        return False
    return True


def _values(key: str, values: list[Any], section: str, problems: Problems) -> bool:
    """A Hydra override's values are numbers, strings, booleans or null (a spec key's are its own,
    checked with its spec); no integer of either is too long to write into a spec."""
    huge = [value for value in values if _too_long(value)]
    if huge:
        problems.add(_field(section, key), f"{shown(huge[0])} is too large: an integer has at most {MAX_BITS} bits")
        return False
    if key in SPEC_KEY:
        return True
    bad = [value for value in values if value is not None and not isinstance(value, bool | int | float | str)]
    if bad:
        problems.add(
            _field(section, key), f"a Hydra override's values are numbers, strings or booleans, not {_quoted(bad[0])}"
        )
        return False
    return True


def _too_long(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_BITS


def _integer(
    value: object,
    field: str,
    low: int,
    high: int,
    problems: Problems,
    *,
    required: bool = False,
    default: int | None = None,
    why: str = "",
) -> int | None:
    """An integer setting from ``low`` to ``high`` (``why``: where the bound comes from)."""
    if value is None:
        if required:
            problems.add(field, "is required")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        because = f" ({why})" if why else ""
        problems.add(field, f"must be an integer from {low} to {high}{because}, not {_quoted(value)}")
        return None
    return value


def _max_concurrent(value: object, problems: Problems) -> int | None:
    return _integer(value, "max_concurrent", 1, _max_trials(), problems, why=MAX_TRIALS_SETTING)


def _early_stop(value: object, problems: Problems) -> tuple[str, str, dict[str, int]]:
    """(metric, mode, {min_steps, eta}); ("", "max", {}) without early_stop."""
    if value is None:
        return "", BEST_MODES[0], {}
    if not isinstance(value, dict):
        problems.add("early_stop", "must be a mapping {metric: NAME, mode: max|min, min_steps: N, eta: E}")
        return "", BEST_MODES[0], {}
    for key in value:
        if key not in EARLY_STOP_KEYS:
            problems.add(f"early_stop.{key}", f"unknown key; early_stop has {', '.join(EARLY_STOP_KEYS)}")
    metric = value.get("metric")
    if not isinstance(metric, str) or not METRIC_NAME.match(metric):
        problems.add(
            "early_stop.metric",
            f"must be the name of a metric verl logs (such as val-core/openai/gsm8k/acc/mean@1), not {_quoted(metric)}",
        )
        metric = ""
    mode = value.get("mode", BEST_MODES[0])
    if mode not in BEST_MODES:
        problems.add("early_stop.mode", f"must be max or min, not {_quoted(mode)}")
    min_steps = _integer(value.get("min_steps"), "early_stop.min_steps", 1, MAX_MIN_STEPS, problems)
    eta = _integer(value.get("eta"), "early_stop.eta", 2, MAX_ETA, problems, default=DEFAULT_ETA)
    if min_steps is None and "eta" in value and "early_stop.min_steps" not in problems.fields:
        problems.add("early_stop.eta", "needs min_steps: rungs are at min_steps x eta^k")
    rungs = {"min_steps": min_steps, "eta": eta} if min_steps is not None and eta is not None else {}
    return metric, str(mode), rungs


def _trial_spec(base: dict[str, Any], params: Params) -> dict[str, Any]:
    """A trial's spec: the base, its swept spec keys set, its swept Hydra overrides appended to
    the base's overrides (basic) or command (advanced)."""
    spec = {**base, **{key: value for key, value in params.items() if key in SPEC_KEY}}
    extra = [f"{key}={_hydra_value(value)}" for key, value in params.items() if key not in SPEC_KEY]
    if not extra:
        return spec
    if spec.get("kind") == TaskKind.ADVANCED:
        command = spec.get("command")
        if isinstance(command, str):
            spec["command"] = _appended(command, extra)
    else:
        overrides = spec.get("overrides")
        if overrides is None or isinstance(overrides, list):
            spec["overrides"] = [*(overrides or []), *extra]
    return spec


def _hydra_value(value: Any) -> str:
    """A value as a Hydra override writes it (a float as Python writes it: 1e-06 is a float to
    Hydra too). A string stays the string the document gave: quoted unless Hydra reads it bare as
    that same string ("true", "null", "1e-6" or "[1, 2]" bare are a bool, null, a float, a list;
    "a,b" a sweep; a quote or a space bare breaks its grammar)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and (not BARE_STRING.fullmatch(value) or value.lower() in HYDRA_WORDS):
        quote = '"' if "'" in value and '"' not in value else "'"
        return quote + value.replace(quote, "\\" + quote) + quote  # an escape: refused as any backslash is
    return str(value)


def _appended(command: str, overrides: list[str]) -> str:
    """An advanced command with ``overrides`` added as its last arguments, a line each."""
    text = command.rstrip()
    if text.endswith("\\"):  # a continuation with nothing after it
        text = text[:-1].rstrip()
    return " \\\n  ".join([text, *(shlex.quote(override) for override in overrides)])


def _swept_overrides(
    base: dict[str, Any], section: str, trials: list[Params], username: str, problems: Problems
) -> None:
    """Each value of each swept Hydra override, checked alone as an advanced command's override
    is (tasks.specs.advanced.check_overrides): a refusal names the key and the value. A basic
    base's overrides may not set a key Argus writes either (the message names the spec key). verl's
    pools are judged with the whole command, in each trial's spec: one override alone may switch a
    pool on whose size the base sets."""
    seen: dict[str, set[str]] = {}
    module = _module(base)
    basic = base.get("kind") != TaskKind.ADVANCED
    in_base = _base_keys(base)
    for params in trials:
        for key, value in params.items():
            if key in SPEC_KEY:
                continue
            bare = key.lstrip("+")
            if key == f"+{bare}" and bare in in_base:
                # Hydra's `+` adds a key the config lacks: after the base's, every trial would
                # fail at its start ("Could not append to config. An item is already at …").
                if key not in seen:
                    problems.add(_field(section, key), f"the base sets {bare} already: sweep ++{bare} or {bare}")
                seen[key] = set()
                continue
            override = f"{key}={_hydra_value(value)}"
            if override in seen.setdefault(key, set()):
                continue
            seen[key].add(override)
            errors, argv = advanced.check_overrides([override], module, username)
            if argv is not None:
                sizing = set(pools.command_pools(module, argv)[1])
                errors = [message for message in errors if message not in sizing]
                errors += set_by_argus(argv, base.get("workload")) if basic else []
            for message in errors:
                problems.add(_field(section, key), f"{override}: {message}")


def _base_keys(base: dict[str, Any]) -> set[str]:
    """The Hydra keys the base's own overrides (basic) or command (advanced) set."""
    command, overrides = base.get("command"), base.get("overrides")
    if base.get("kind") == TaskKind.ADVANCED and isinstance(command, str):
        read = advanced.command_argv(command)
        return {leaf.key for leaf in read[1].leaves} if read is not None else set()
    if isinstance(overrides, list) and all(isinstance(override, str) for override in overrides):
        return {leaf.key for leaf in hydra_argv.parse(overrides).leaves}
    return set()


def _module(base: dict[str, Any]) -> str:
    """The verl module the trials run: an advanced base's command's, else the one Argus writes."""
    command = base.get("command")
    if base.get("kind") == TaskKind.ADVANCED and isinstance(command, str):
        read = advanced.command_argv(command)
        if read is not None:
            return read[0]
    workload = base.get("workload")
    return verl_names.trainer_module(workload if isinstance(workload, str) else None)


def _trial_specs(
    base: dict[str, Any],
    section: str,
    trials: list[Params],
    username: str,
    problems: Problems,
    judged_on: str | None,
) -> list[Trial]:
    """Each trial's spec checked by parse_spec, its refusals named as _Refusals names them. With
    early stopping on a validation metric (``judged_on``), a basic trial must validate while it
    trains: verl logs val-… metrics every test_freq steps, and with -1 only before training
    (val_before_train), so each rung would judge the trials on the model they all started from."""
    refusals = _Refusals(section, trials)
    parsed: list[Trial] = []
    for index, params in enumerate(trials):
        try:
            spec = parse_spec(_trial_spec(base, params), username=username)
        except SpecError as error:
            refusals.add(index, error.fields)
            continue
        never = _never_validates(spec) if judged_on else None
        if never is not None:
            field, words = never
            reason = (
                "verl logs validation metrics every test_freq steps (with -1, verl's default, or 0: only "
                "before training, where every trial scores the same model, and at the end, past every rung); "
                "set it to min_steps or a divisor of it"
            )
            refusals.add(index, {field: [f"{words} for early_stop on {judged_on}: {reason}"]})
            continue
        parsed.append(Trial(index=index, params=params, parsed=spec))
    for field, message in refusals.fields():
        problems.add(field, message)
    return parsed


def _never_validates(spec: ParsedSpec) -> tuple[str, str] | None:
    """The field (and what it must do) of a trial whose verl run validates only before training:
    a basic spec's test_freq, or an advanced command that leaves trainer.test_freq at verl's -1
    (ppo_trainer.yaml, sft_trainer_engine.yaml) or sets it to -1 or 0; None when it validates while
    it trains (SFT's after_each_epoch too)."""
    resolved = spec.resolved
    if resolved.kind == TaskKind.BASIC:
        return ("test_freq", "must be set") if resolved.test_freq is not None and resolved.test_freq <= 0 else None
    read = advanced.command_argv(resolved.command or "")
    if read is None or read[0] not in (verl_names.PPO_MODULE, verl_names.SFT_MODULE):
        return None  # not verl's trainer (the demo's): its own rules
    value = _command_value(read[1], verl_names.TEST_FREQ, -1)  # verl's default: -1
    if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        return ("command", f"must set {verl_names.TEST_FREQ} to a positive number of steps")
    return None


def _command_value(args: HydraArgv, key: str, default: object) -> object:
    """The value an advanced command's overrides set ``key`` to: Hydra applies the last."""
    values = args.values(key)
    return values[-1] if values else default


def _metric_logged(metric: str, module: str, problems: Problems) -> None:
    """A validation metric verl's trainer never logs by that name (a typo, PPO's names on an SFT
    run or the reverse) is a 400 naming it: the sweep would judge and rank no trial, silently."""
    if not metric.startswith(VALIDATION_PREFIX):
        return
    if module == verl_names.SFT_MODULE and metric != SFT_VALIDATION:
        problems.add("early_stop.metric", f"verl's SFT trainer logs its validation as {SFT_VALIDATION} only")
    if module == verl_names.PPO_MODULE and not PPO_VALIDATION.fullmatch(metric):
        problems.add(
            "early_stop.metric",
            "verl's PPO trainer names its validation metrics val-core/DATA_SOURCE/VARIABLE/METRIC or val-aux/… "
            f"(e.g. val-core/openai/gsm8k/reward/mean@1), not '{metric}'",
        )


def _rungs_reached(trials: list[Trial], early_stop: dict[str, int], problems: Problems) -> None:
    """Early stopping whose first rung is past every trial's last step would judge none: a 400
    naming min_steps (an epochs count taken for steps, say). A trial whose steps the epochs set
    (no total_training_steps) may reach it."""
    if not early_stop or not trials:
        return
    totals = []
    for trial in trials:
        resolved = trial.parsed.resolved
        if resolved.kind == TaskKind.BASIC:
            total: object = resolved.total_training_steps
        else:
            read = advanced.command_argv(resolved.command or "")
            total = _command_value(read[1], verl_names.TOTAL_TRAINING_STEPS, None) if read else None
        if not isinstance(total, int) or isinstance(total, bool) or total >= early_stop["min_steps"]:
            return
        totals.append(total)
    problems.add(
        "early_stop.min_steps",
        f"is past every trial's last step (total_training_steps at most {max(totals)}): no trial would "
        "reach a rung, and early stopping would stop none",
    )


def trial_errors(document: SweepDocument, check: Callable[[ParsedSpec], dict[str, list[str]]]) -> dict[str, list[str]]:
    """What ``check`` (tasks.submit.request_errors: the site's limits now) says of each trial's
    spec, by field, named as parse_sweep names a trial's refusals."""
    refusals = _Refusals(document.section, [trial.params for trial in document.trials])
    for trial in document.trials:
        refusals.add(trial.index, check(trial.parsed))
    problems = Problems()
    for field, message in refusals.fields():
        problems.add(field, message)
    return problems.fields


class _Refusals:
    """Trials' refusals by field: a swept spec key's by the key (``grid.<key>``), any other by the
    base's (``base.<key>``); each message names the first trial it refuses (its params) and how
    many others, or says it refuses every trial."""

    def __init__(self, section: str, trials: list[Params]) -> None:
        self.section = section
        self.trials = trials
        self.found: dict[tuple[str, str], list[int]] = {}

    def add(self, index: int, fields: dict[str, list[str]]) -> None:
        params = self.trials[index]
        for field, messages in fields.items():
            root = field.split(".", 1)[0]
            where = _field(self.section, field) if root in params and root in SPEC_KEY else f"base.{field}"
            for message in messages:
                self.found.setdefault((where, message), []).append(index)

    def fields(self) -> Iterator[tuple[str, str]]:
        for (where, message), indices in self.found.items():
            yield where, self._for_trials(message, indices)

    def _for_trials(self, message: str, indices: list[int]) -> str:
        if len(indices) == len(self.trials) > 1:
            return f"{message} (every trial)"
        first = indices[0]
        more = len(indices) - 1
        others = f" (and {more} other trial{'s' if more > 1 else ''})" if more else ""
        return f"trial {first} ({describe_params(self.trials[first])}): {message}{others}"
