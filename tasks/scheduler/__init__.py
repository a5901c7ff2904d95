"""The scheduler: admit what fits, follow it on Ray, settle how it ended.

Read it in the order a tick runs it:

1. ``loop.run`` is what django-q2 runs: it holds the tick lease (tasks.lease, which also fences
   every move a scheduler makes) and ticks; ``turns`` isolates each task's turn and keeps the
   tick's time budget.
2. ``tick.tick`` is one pass, in this order: Ray's cluster (``rayjobs``, behind the ``RayClient``
   interface), then
3. ``sync.sync``: each live attempt with one cheap call to Ray; ``watch`` looks at a running one
   for what Ray cannot see (time limit, silence, a placement never given, a preemption due);
   ``stops`` stops a job, the why written first;
4. ``cancels``: what a person canceled;
5. ``usage.charge``: fair-share usage, what ran since the last tick;
6. ``tick.release``: WAITING tasks whose dependencies ended become QUEUED (a pipeline
   step's ``${steps.…}`` outputs written in) or CANCELED (an ``after`` one failed); pipelines whose
   last step ended end (the rules: tasks.pipelines.waiting);
7. ``launch.admit``: the queue (tasks.queue: ``rows``, a copy kept between ticks: each tick reads only
   what changed, and what admission reads of it is made again only when it changed) in order
   (``order``), free room (``launch.free_room``, from the live attempts the tick reads
   once, ``launch.live_holdings``), the decision of the pure core below, then each attempt
   started, the row first (SUBMITTING, deterministic submission id), then Ray, with the job's
   environment from ``job_env`` (secrets, the tracker's run), each attempt recording the group
   and quota it was admitted in; ``preempt`` marks and withdraws victims, a preemption's or a
   reclaim's;
8. ``sweep.sweep``, now and then: Ray's whole job table (orphans, retention, foreign jobs).
9. ``tasks.checkpoints.prune.prune_due``, while the budget lasts: each running (or lately ended)
   task's checkpoints kept within its keep_checkpoints, at most once every
   ARGUS_CHECKPOINT_PRUNE_S (the rules: tasks.checkpoints).

An attempt's end is decided in one place, ``settle.settle``: how it failed (``failures``, read
from Ray's status and the driver log) and what follows, a table (``settle.AFTER_FAILURE``).

The pure policy core, plain numbers and no Django, which bench/policy_sim.py drives too:
``admission`` (who starts, who waits and why, whom to preempt or reclaim), ``quotas`` (the
groups' quotas: in use, borrowed, what may be borrowed), ``reclaim`` (which borrowed tasks give
their room back, and when), ``plan`` (free room over time: reservations, estimates), ``rooms``
(free room per node, where a gang fits), with the queue's
``tasks.queue.fairshare`` (its order) and ``tasks.queue.request`` (what a task asks).

``storage`` bounds every file call of the tick. This package's ``__init__`` imports nothing.
"""
