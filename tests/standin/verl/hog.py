"""Not part of verl: a job that takes GPUs outside Argus, to create races in tests.

``python3 -m verl.hog GPUS SECONDS`` holds GPUS (spread one per bundle) for SECONDS."""

from __future__ import annotations

import sys
import time

import ray
from ray.util.placement_group import placement_group

if __name__ == "__main__":
    gpus, seconds = int(sys.argv[1]), float(sys.argv[2])
    ray.init()
    group = placement_group([{"GPU": 1}] * gpus, strategy="PACK")
    ray.get(group.ready())
    print(f"holding {gpus} GPUs for {seconds} s", flush=True)
    time.sleep(seconds)
