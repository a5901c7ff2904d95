from __future__ import annotations

from tests.accounts.groups.conftest import make_group as make_group  # the groups' own fixture
