from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from accounts.groups.models import Membership, QuotaGroup


@pytest.fixture
def make_group(db) -> Callable[..., QuotaGroup]:
    def make(name: str, *members: User, **quota: Any) -> QuotaGroup:
        group = QuotaGroup.objects.create(name=name, **{"nominal_gpus": 8, **quota})
        for user in members:
            Membership.objects.create(user=user, group=group)
        return group

    return make
