"""`make run`: the whole system on this machine, in the foreground.

A Ray head (`raynode head`) and ARGUS_DEV_WORKERS workers (`raynode worker`) declaring
ARGUS_DEV_GPUS GPUs each, on Ray's token authentication as in production (ARGUS_RAY_AUTH, token
by default: the head makes the token beside head.json, the scheduler sends it), the scheduler
(`qcluster`), the webhook worker (`sendwebhooks`), the web service (gunicorn on
127.0.0.1:ARGUS_PORT) and the SFTP server (`manage.py sftpd` on 127.0.0.1:ARGUS_SFTP_PORT). A
first admin is made once; its password and token are kept under var/ (mode 600) so a second
run can say them again, as are the secret key and the key users' secrets are encrypted with
(var/secrets-key). Ctrl-C stops
everything this started, and only that: each child gets SIGTERM on its main process (qcluster
stops its workers between tasks, raynode stops its own Ray node, sendwebhooks lets its tries
end), then SIGKILL to its group if it lingers.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "standin"
VAR = ROOT / "var"
VENV_BIN = Path(sys.executable).parent
PYTHON = str(VENV_BIN / "python")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def secret(path: Path, make: Callable[[], str]) -> str:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(make())
    return path.read_text().strip()


def fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    if not env.get("ARGUS_SECRET_KEY"):
        env["ARGUS_SECRET_KEY"] = secret(VAR / "secret-key", lambda: secrets.token_urlsafe(50))
    if not env.get("ARGUS_SECRETS_KEY"):
        # Users' secrets are encrypted with it (accounts/secrets.py); kept, like the secret key,
        # so that a second run still reads what the first stored.
        env["ARGUS_SECRETS_KEY"] = secret(VAR / "secrets-key", fernet_key)
    env.setdefault("ARGUS_SHARED_ROOT", str(VAR / "private"))
    env.setdefault("ARGUS_LOG_FORMAT", "plain")
    # The demo's trainer lives in examples/: allowed here, in the development setup only.
    env.setdefault("ARGUS_ADVANCED_ALLOWED_MODULES", "verl.trainer.,examples.")
    # Job drivers run `python3 -m raypool.driver …`: this venv's python3, this checkout importable.
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    if importlib.util.find_spec("verl") is None:
        # No verl here: the tests' stand-in (its trainers' entry points and model merger) runs
        # the pipeline demo, examples/pipeline.yaml. A real verl in the venv is left to run.
        env["PYTHONPATH"] += f":{STANDIN}"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return env


def manage(
    env: dict[str, str], *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    argv = [PYTHON, "manage.py", *args]
    return subprocess.run(argv, cwd=ROOT, env=env, input=stdin, text=True, capture_output=True, check=check)


def first_admin(env: dict[str, str]) -> tuple[str, str]:
    password_file, token_file = VAR / "admin-password", VAR / "admin-token"
    if manage(env, "argus_user", "exists", "admin", check=False).returncode != 0:
        password_file.unlink(missing_ok=True)
        token_file.unlink(missing_ok=True)
        password = secret(password_file, lambda: secrets.token_urlsafe(12))
        manage(env, "argus_user", "create", "admin", "--admin", "--password-stdin", stdin=password)
    password = password_file.read_text().strip() if password_file.exists() else "(set before; see var/admin-password)"
    issue = ("argus_token", "issue", "admin", "--name", "make-run")
    token = secret(token_file, lambda: manage(env, *issue).stdout.strip())
    return password, token


class Stack:
    def __init__(self) -> None:
        self.children: list[tuple[str, subprocess.Popen]] = []
        VAR.joinpath("log").mkdir(parents=True, exist_ok=True)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = (VAR / "log" / f"{name}.log").open("ab")
        # Its own session: Ctrl-C in this terminal reaches us alone, and we stop each child in order.
        child = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.children.append((name, child))
        return child

    def dead(self) -> list[str]:
        return [name for name, child in self.children if child.poll() is not None]

    def stop(self) -> None:
        # A second Ctrl-C (or make passing the first one on) must not cut the shutdown short and
        # leave nodes behind: from here on, signals are ignored until every child is gone.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for name, child in reversed(self.children):
            if child.poll() is None:
                print(f"  stopping {name} (pid {child.pid})", flush=True)
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(40)
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait(10)


def agent_ports(node: int) -> str:
    """Each node on this host needs its own agent ports (RAY_NOTES.md). Below Linux's ephemeral
    range (32768+), so that a port freed by a restarting node is not taken by a client meanwhile."""
    base = env_int("ARGUS_DEV_AGENT_PORT_BASE", 20100) + 10 * node
    return (
        f"--dashboard-agent-listen-port={base} --dashboard-agent-grpc-port={base + 1} "
        f"--metrics-export-port={base + 2} --runtime-env-agent-port={base + 3}"
    )


def cluster_gpus(gcs_address: str, token_file: Path) -> float:
    from ray.autoscaler.v2.sdk import get_cluster_status

    from raypool.raytoken import read_token, use_in_process

    token = read_token(token_file)
    if token is not None:  # ARGUS_RAY_AUTH=token: the GCS answers no one without it
        use_in_process(token)
    try:
        status = get_cluster_status(gcs_address, timeout=3)
    except Exception:
        return -1.0
    return sum(u.total for u in status.cluster_resource_usage if u.resource_name == "GPU")


def wait(what: str, predicate, timeout: float, stack: Stack) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if stack.dead():
            raise SystemExit(f"{', '.join(stack.dead())} exited while waiting for {what}: see var/log/")
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}: see var/log/")


def main() -> int:
    started = time.monotonic()
    env = base_env()
    sys.path.insert(0, str(ROOT))
    print("Migrating the database…", flush=True)
    manage(env, "migrate", "--noinput")
    password, token = first_admin(env)

    workers, gpus = env_int("ARGUS_DEV_WORKERS", 2), env_int("ARGUS_DEV_GPUS", 4)
    ray_port, dashboard_port = env_int("ARGUS_RAY_PORT", 6379), env_int("ARGUS_DASHBOARD_PORT", 8265)
    port = env_int("ARGUS_PORT", 8000)
    sftp_port = env_int("ARGUS_SFTP_PORT", 2222)
    stack = Stack()
    interrupted = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        raise KeyboardInterrupt

    # Installed explicitly: a shell that starts us in the background leaves SIGINT ignored.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        head_env = {
            **env,
            "ARGUS_RAY_PORT": str(ray_port),
            "ARGUS_DASHBOARD_PORT": str(dashboard_port),
            "ARGUS_RAY_EXTRA_ARGS": f"--temp-dir=/tmp/argus-ray-{port} --object-store-memory=100000000 "
            + agent_ports(0),
        }
        print(f"Starting the Ray head (GCS :{ray_port}, dashboard :{dashboard_port})…", flush=True)
        stack.start("ray-head", [PYTHON, "manage.py", "raynode", "head"], head_env)
        gcs = f"127.0.0.1:{ray_port}"
        wait("head.json", lambda: manage(env, "raynode", "status", check=False).returncode == 0, 90, stack)
        from raypool.config import NodeConfig

        # With ARGUS_RAY_AUTH=token the head made it before it started Ray (beside head.json).
        token_file = NodeConfig.from_env(head_env).token_file
        for index in range(workers):
            ports = agent_ports(index + 1)
            # 3 CPUs per GPU, as verl's bundles ask (ARGUS_CPUS_PER_GPU), plus 2 for its TaskRunner and the driver.
            cpus = 3 * gpus + 2
            worker_env = {
                **env,
                "ARGUS_RAY_EXTRA_ARGS": f"--num-gpus={gpus} --num-cpus={cpus} --object-store-memory=200000000 {ports}",
            }
            print(f"Starting worker {index + 1} of {workers} ({gpus} declared GPUs)…", flush=True)
            stack.start(f"ray-worker{index + 1}", [PYTHON, "manage.py", "raynode", "worker"], worker_env)
            # One at a time: two raylets starting together on one host collide on a socket.
            want = gpus * (index + 1)
            wait(f"{want} GPUs in the cluster", lambda w=want: cluster_gpus(gcs, token_file) >= w, 120, stack)
        servers = {**env, "ARGUS_LOG_STREAM": "stdout"}
        stack.start("scheduler", [PYTHON, "manage.py", "qcluster"], servers)
        # Webhooks in their own process: a slow receiver can never hold the scheduler's workers.
        stack.start("webhooks", [PYTHON, "manage.py", "sendwebhooks"], servers)
        stack.start(
            "web",
            [str(VENV_BIN / "gunicorn"), "argus_site.wsgi", "-c", "deploy/gunicorn.conf.py", "-b", f"127.0.0.1:{port}"],
            servers,
        )
        # SFTP into the users' homes (docs/storage.md); its host key is kept in var/.
        stack.start("sftpd", [PYTHON, "manage.py", "sftpd", "--host", "127.0.0.1", "--port", str(sftp_port)], servers)
        manage(env, "shell", "-c", "from tasks.lease import enqueue_run; enqueue_run()")
        url = f"http://127.0.0.1:{port}"
        wait("the web service", lambda: _http_ok(f"{url}/healthz"), 60, stack)
        print(
            f"""
Argus is up in {time.monotonic() - started:.0f} s: {url}/
  sign in:   admin / {password}
  API token: {token}   (also in var/admin-token)
  cluster:   {workers} workers x {gpus} declared GPUs; Ray dashboard http://127.0.0.1:{dashboard_port}
             (with ARGUS_RAY_AUTH=token it asks for the token in {token_file})
  sftp:      sftp -P {sftp_port} admin@127.0.0.1   (the API token as the password, or a key added on /account/)
  logs:      var/log/
  the demo:  curl -H "Authorization: Bearer $(cat var/admin-token)" -H "Content-Type: application/yaml" \\
               --data-binary @examples/demo.yaml {url}/api/v2/tasks
  pipeline:  the same with @examples/pipeline.yaml to {url}/api/v2/pipelines (SFT -> export -> PPO)
Ctrl-C stops everything.""",
            flush=True,
        )
        while not stack.dead():
            time.sleep(1)
        print(f"{', '.join(stack.dead())} exited: see var/log/. Stopping the rest.", flush=True)
        return 1
    except KeyboardInterrupt:
        print("\nStopping…", flush=True)
        return 0
    finally:
        stack.stop()
        print("Stopped.", flush=True)


def _http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
