#!/usr/bin/env bash
# The whole suite in two runs, each as parallel as it can safely be (`make test` and
# `make test-postgres` use it; any pytest arguments are passed on to both runs):
# 1. every test that needs no real Ray (unit, browser, fuzz) on XDIST workers;
# 2. the tests on real Ray (ray, pool, chaos) on RAY_XDIST workers, with --dist loadgroup: the
#    tests sharing the session's cluster stay on one worker, each node-pool module on one, the
#    chaos run alone (tests/conftest.py sets the groups).
# A Ray cluster takes ~1.2 GB and a core of its own while it starts: on 2 cores, two at once
# left a node pool's workers unjoined after 90 s, so Ray gets a worker per 2 cores (none
# below 4: in this process). Both runs always run; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."

cores=$(nproc)
XDIST=${XDIST:-$(( cores < 4 ? cores : 4 ))}
ray_default=$(( cores / 2 < 4 ? cores / 2 : 4 ))
RAY_XDIST=${RAY_XDIST:-$(( ray_default < 2 ? 0 : ray_default ))}
pytest=.venv/bin/pytest

status=0
run() {
  "$pytest" "$@"
  local code=$?
  # 5: nothing collected, as when the arguments name tests of one kind only.
  if [ "$code" != 0 ] && [ "$code" != 5 ] && [ "$status" = 0 ]; then
    status=$code
  fi
}

echo "== tiers unit, browser, fuzz on $XDIST workers"
run -n "$XDIST" --dist loadgroup -m "not ray" "$@"
echo "== tiers ray, pool, chaos on $RAY_XDIST workers"
run -n "$RAY_XDIST" --dist loadgroup -m ray "$@"
exit "$status"
