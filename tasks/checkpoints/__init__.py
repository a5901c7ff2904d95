"""A task's checkpoints kept within bounds (issue 28 item 2): verl's global_step_N folders in the
task's checkpoint folder, pruned to the spec's keep_checkpoints (and keep_best) off the tick's
critical path, every file call bounded.

- folders: what is on disk (steps, sizes, which one is complete) and the deletion itself;
- retention: the rule, pure: which steps go;
- needs: who needs which step (a running attempt resumed from it, a task that reads it);
- prune: the pass the tick runs, and the events it records.
"""
