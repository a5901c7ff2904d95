from __future__ import annotations

from tests.tasks.fake_ray import fake_ray

__all__ = ["fake_ray"]
