"""The scheduler: admit what fits, follow it on Ray, settle how it ended.

Read it in the order an attempt lives:

1. ``loop.run`` is what django-q2 runs: it holds the tick lease (``lease``) and ticks.
2. ``tick.tick`` is one pass, with a time budget; each task's step in it is isolated
   (``steps``): one bad task costs that task, never the tick.
3. ``launch.admit`` walks the queue through ``admission``'s pure functions and starts an
   attempt: the row first (SUBMITTING, deterministic submission id), then Ray (``rayjobs``).
4. ``sync.sync`` follows each live attempt with one cheap call to Ray.
5. ``cancels`` stops what a person canceled.
6. ``settle.settle`` is an attempt's end, in one place: how it failed (``failures``), whether
   the task retries, waits, fails or is canceled.
7. ``sweep.sweep`` looks at Ray's whole job table now and then: it stops orphans, deletes
   finished jobs after their retention and notes jobs that Argus did not submit.

This package's ``__init__`` imports nothing: the web side asks for ticks through ``lease``
without loading Ray.
"""
