"""Stand-in for verl.workers.engine: none of verl's optional engines is installed here either, so
importing it warns as real verl 0.9.1 does, in every process that imports it (the TaskRunner and
each worker). The warning names a ModuleNotFoundError: Argus must not take it for the failure."""

from __future__ import annotations

import warnings

# verl/workers/engine/__init__.py tries these in this order and warns with the same words.
for _engine, _module in (
    ("torchtitan", "torchtitan"),
    ("veomni", "veomni"),
    ("automodel", "nemo_automodel"),
    ("mindspeed", "megatron"),
    ("megatron", "megatron"),
):
    try:
        __import__(_module)
    except ImportError as e:
        warnings.warn(f"{_engine} engine is not available: {e!r}", stacklevel=1)
