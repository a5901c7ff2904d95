"""Task specs: the one table of spec keys and their parsing (parse), the Hydra argv of
advanced commands (hydra_argv), the path policy (paths), and verl's command built from a spec
(builders)."""
