"""Sweeps: one document runs a grid (or random samples) of trials of one base spec, at most
max_concurrent at once, stops the losers early on verl's own validation metrics (successive
halving) and names the best trial.

- models.py: Sweep, RungValue and TrialCurve (the tasks app's models: tasks.models imports them); each trial
  is a Task (Task.sweep, .trial_index, .params, .early_stopped)
"""
