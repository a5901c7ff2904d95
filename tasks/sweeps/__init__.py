"""Sweeps: one document runs a grid (or random samples) of trials of one base spec, at most
max_concurrent at once, stops the losers early on verl's own validation metrics (successive
halving) and names the best trial.

- models.py: Sweep, RungValue and TrialCurve (the tasks app's models: tasks.models imports them); each trial
  is a Task (Task.sweep, .trial_index, .params, .early_stopped)
- cap.py: the cap's release in the tick (waiting trials queued in trial order while fewer than
  max_concurrent are admitted; their reason "sweep NAME: N of M trials running")
- lifecycle.py: the sweep's end when its last trial ends (SWEEP_SUCCEEDED / SWEEP_FAILED on that
  trial) and its reopening when a trial is requeued; below tasks.models, whose moves call it
- api/: /api/v2/sweeps (submit, list, detail, cancel)
"""
