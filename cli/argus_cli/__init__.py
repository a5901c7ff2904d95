"""The argus command: a terminal client of the Argus API (/api/v2)."""

from __future__ import annotations

__version__ = "0.1.0"
