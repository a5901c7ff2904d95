"""The driver wrapper every Ray job runs: ``python3 -m raypool.driver --log PATH -- ARGV...``.

It runs the training command, writes its whole output to ``driver.log`` as it comes (so the log
survives a head restart and can be read without Ray), passes it through to Ray's own job log,
and exits with the command's exit code. It imports neither Django nor Ray.

Both copies are redacted (common.redact): ``[redacted]`` in place of well-known credential
shapes and of the values of the job's secrets. Those values reach the driver as Ray gives every
process of a job its environment, the env_vars of the job's runtime_env; ARGUS_SECRET_NAMES
(raypool.config.SECRET_NAMES_ENV) names which variables they are. So no value is ever written
to a file, put in an argv (which ``ps`` shows every user of the node) or read from anywhere
but this process's own environment, which the trainer gets unchanged: it needs the keys (W&B
logs in with WANDB_API_KEY in the driver and in Ray's workers alike).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from common.redact import Redactor
from raypool.config import SECRET_NAMES_ENV


def redactor_from(environ: Mapping[str, str]) -> Redactor:
    """The values of the variables SECRET_NAMES_ENV names, and the well-known shapes."""
    names = [name for name in environ.get(SECRET_NAMES_ENV, "").split(",") if name]
    return Redactor(environ[name] for name in names if environ.get(name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raypool.driver")
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")

    args.log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    redact = redactor_from(os.environ)
    with args.log.open("ab", buffering=0) as log:
        try:
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        except OSError as error:
            message = redact.data(f"[argus-driver] cannot start {command[0]!r}: {error}\n".encode())
            log.write(message)
            sys.stdout.buffer.write(message)
            return 127

        def forward(signum: int, frame: FrameType | None) -> None:
            # Ray stops a job with SIGTERM (then SIGKILL): let the trainer shut down cleanly.
            child.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        assert child.stdout is not None
        # Whole lines (a value is printable: it never spans two), so a value is never split
        # between two writes where redaction could not see it.
        for chunk in iter(child.stdout.readline, b""):
            chunk = redact.data(chunk)
            log.write(chunk)
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
        code = child.wait()
        log.write(f"[argus-driver] command exited with code {code}\n".encode())
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
