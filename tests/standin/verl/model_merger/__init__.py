"""Stand-in for verl.model_merger (verl 0.9.1): see __main__.py."""
