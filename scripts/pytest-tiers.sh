#!/usr/bin/env bash
# The suite in two lanes (`make test` and `make test-postgres` use it; any pytest arguments are
# passed on to both lanes):
#   ray   the tests on real Ray (ray, pool, chaos), on RAY_XDIST workers with --dist loadgroup:
#         each test to whichever worker is free, the longest first, and a module with a cluster
#         or node pool of its own on one worker, so that it starts once (each worker starts the
#         session's shared cluster at its first test that needs it; tests/conftest.py sets the
#         groups and the order);
#   rest  every test that needs no real Ray (unit, browser, fuzz), on REST_XDIST workers.
# From 4 cores the lanes run side by side (the rest on the cores the Ray lane leaves), below one
# after the other (LANES=parallel|serial chooses). The Ray lane gets 2 workers, one per 2 cores
# from 4 cores on, at most 4: a test on real Ray waits on Ray more than it computes (a job's
# start, its steps, a node's health checks): on 2 cores one worker kept them about half busy,
# two ran the lane in 14 min at 92 % of both; each worker's cluster takes ~1.2 GB. Each lane's
# lines are prefixed with its name; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."

cores=$(nproc)
# Below 4 cores the lanes run one after the other: both are CPU-bound there (on 2 cores, side by
# side, the lanes of 2026-11-25 took 36 and 19 min, one after the other 24 and 7).
LANES=${LANES:-$([ "$cores" -ge 4 ] && echo parallel || echo serial)}
if [ "$LANES" = serial ]; then
  REST_XDIST=${REST_XDIST:-$(( cores < 4 ? cores : 4 ))}
else
  REST_XDIST=${REST_XDIST:-$(( cores - 1 < 4 ? cores - 1 : 4 ))}
fi
ray_default=$(( cores / 2 < 4 ? cores / 2 : 4 ))
RAY_XDIST=${RAY_XDIST:-$(( ray_default < 2 ? 2 : ray_default ))}
RAY_MARK=${RAY_MARK:-ray}
REST_MARK=${REST_MARK:-not ray}
# Each lane ends with its slowest tests: what to look at when CI grows.
pytest=(.venv/bin/pytest --durations=15)

lane() {
  local name=$1
  shift
  # sed keeps reading through a Ctrl-C, so that pytest's teardown (which stops the Ray nodes
  # it started) is still printed.
  # ARGUS_TEST_LANE: each lane's test databases apart from the other's (tests/conftest.py).
  ARGUS_TEST_LANE=$name "${pytest[@]}" "$@" 2>&1 | (trap '' INT; exec sed -u "s/^/[$name] /")
  local code=${PIPESTATUS[0]}
  # 5: nothing collected, as when the arguments name tests of one kind only.
  if [ "$code" = 5 ]; then code=0; fi
  echo "$code" >"$codes/$name"
}

codes=$(mktemp -d)
trap 'rm -rf "$codes"' EXIT
echo "== lanes ($LANES): ray ($RAY_MARK) on $RAY_XDIST workers, rest ($REST_MARK) on $REST_XDIST workers"
if [ "$LANES" = serial ]; then
  lane rest -n "$REST_XDIST" --dist loadgroup -m "$REST_MARK" "$@"
  lane ray -n "$RAY_XDIST" --dist loadgroup -m "$RAY_MARK" "$@"
else
  # Job control: each lane in a process group of its own, where SIGINT is not ignored (a
  # background job's is, without it). A Ctrl-C (or SIGTERM) is passed on to both lanes as
  # SIGINT: pytest stops and tears its fixtures down, Ray nodes included.
  set -m
  lane ray -n "$RAY_XDIST" --dist loadgroup -m "$RAY_MARK" "$@" &
  ray_lane=$!
  lane rest -n "$REST_XDIST" --dist loadgroup -m "$REST_MARK" "$@" &
  rest_lane=$!
  trap 'kill -INT -- -"$ray_lane" -"$rest_lane" 2>/dev/null' INT TERM
  # wait returns early when a signal is trapped: wait until both lanes have ended.
  while kill -0 "$ray_lane" 2>/dev/null || kill -0 "$rest_lane" 2>/dev/null; do
    wait
  done
fi
status=0
for name in rest ray; do
  code=$(cat "$codes/$name" 2>/dev/null || echo 1)
  echo "== lane $name: exit $code"
  if [ "$code" != 0 ] && [ "$status" = 0 ]; then status=$code; fi
done
exit "$status"
