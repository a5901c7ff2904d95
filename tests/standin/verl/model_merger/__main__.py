"""Stand-in for ``python3 -m verl.model_merger merge --backend fsdp --local_dir D --target_dir T``.

As verl 0.9.1's (verl/model_merger/base_model_merger.py, fsdp_model_merger.py): it makes the
target folder, loads the model's config from ``<local_dir>/huggingface`` (transformers' error when
it is not there: a PPO/GRPO checkpoint's ``global_step_N`` itself, whose shards are in ``actor/``),
reads the world size from ``<local_dir>/fsdp_config.json`` (``FileNotFoundError: Config file …
does not exist.``), then the rank shards ``model_world_size_{W}_rank_{R}.pt``; and writes a
Hugging Face folder: config.json, model.safetensors, generation_config.json, tokenizer files.
An error ends it as verl's does: the traceback, exit code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="verl model merger")
    operations = parser.add_subparsers(dest="operation", required=True)
    merge = operations.add_parser("merge")
    merge.add_argument("--backend", type=str, required=True, choices=["fsdp", "megatron"])
    merge.add_argument("--local_dir", type=str, default=None)
    merge.add_argument("--target_dir", type=str, default="tmp")
    return parser.parse_args(argv)


def merge(args: argparse.Namespace) -> None:
    print(f"config: {vars(args)}", flush=True)
    os.makedirs(args.target_dir, exist_ok=True)
    hf_config = os.path.join(args.local_dir, "huggingface")
    if not os.path.isfile(os.path.join(hf_config, "config.json")):
        # What transformers' AutoConfig.from_pretrained raises for a folder without a config.
        raise OSError(
            f"Can't load the configuration of '{hf_config}'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory with the same name. "
            f"Otherwise, make sure '{hf_config}' is the correct path to a directory containing a config.json file"
        )
    config_path = os.path.join(args.local_dir, "fsdp_config.json")
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"Config file {config_path} does not exist.")
    with open(config_path) as f:
        world_size = json.load(f).get("world_size")
    if world_size is None:
        raise ValueError("World size not found in the config file.")
    shards = [
        os.path.join(args.local_dir, f"model_world_size_{world_size}_rank_{rank}.pt") for rank in range(world_size)
    ]
    for shard in shards:
        if not os.path.exists(shard):
            raise FileNotFoundError(f"[Errno 2] No such file or directory: '{shard}'")
    print(f"Processing model shards with {world_size} ({world_size},) in total", flush=True)
    print(f"Saving model to {args.target_dir}", flush=True)
    with open(os.path.join(hf_config, "config.json")) as f:
        config = f.read()
    files = {
        "config.json": config,
        "generation_config.json": "{}\n",
        "model.safetensors": f"stand-in weights merged from {len(shards)} shard(s) of {args.local_dir}\n",
        "tokenizer.json": "{}\n",
        "tokenizer_config.json": "{}\n",
    }
    for name, text in files.items():
        with open(os.path.join(args.target_dir, name), "w") as f:
            f.write(text)
    print(f"Saving tokenizer to {args.target_dir}", flush=True)


if __name__ == "__main__":
    merge(parse_args(sys.argv[1:]))
