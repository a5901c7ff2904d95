"""What the tests and the benches both use: a real local Ray cluster (ray_cluster), a node pool
on this host (pool), the fake Ray of the deterministic tests and the benches (fake_ray), the
stand-in trainer's specs (standin) and the one way to wait for a condition (wait). Not part of
Argus: nothing under the apps imports it."""
