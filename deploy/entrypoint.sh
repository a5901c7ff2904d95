#!/usr/bin/env bash
# The image's entrypoint: one image, the role from ARGUS_ROLE.
#   head | worker    a Ray node: `manage.py raynode <role>` (SPEC §7)
#   web              the API and web UI: gunicorn (migrates and collects static files first),
#                    and beside it the SFTP server, `manage.py sftpd` (ARGUS_SFTP_PORT)
#   scheduler        the scheduler, `manage.py qcluster`, and beside it the webhook worker,
#                    `manage.py sendwebhooks` (its own process: no receiver can hold the tick)
# Writes a supervisord config for the role, then runs supervisord in the foreground. Every
# setting comes from the environment.
#
# Entrypoint-only variables:
#   ARGUS_RUN_DIR   where supervisord.conf, its socket and pid file go (default /run/argus);
#                   `supervisorctl -c $ARGUS_RUN_DIR/supervisord.conf status` inspects it.
#   ARGUS_PYTHON    the interpreter that runs manage.py (default python3).
#   ARGUS_ENTRYPOINT_DRY_RUN=1   print the generated config and exit instead of running it.
set -euo pipefail

cd "$(dirname "$(readlink -f "$0")")/.."
PYTHON="${ARGUS_PYTHON:-python3}"

role="${ARGUS_ROLE:-}"
case "$role" in
  head | worker) ray_node=1 ;;
  web | scheduler) ray_node=0 ;;
  *)
    echo "entrypoint: ARGUS_ROLE must be head, worker, web or scheduler, not '${role}'" >&2
    exit 2
    ;;
esac

if [ "$ray_node" = 0 ]; then
  # The control plane signs sessions and reaches the database: a real ARGUS_SECRET_KEY is
  # required (the settings refuse to load without one); logs are JSON lines on stdout.
  export ARGUS_LOG_STREAM="${ARGUS_LOG_STREAM:-stdout}"
  if [ "$role" = web ] && [ "${ARGUS_ENTRYPOINT_DRY_RUN:-}" != "1" ]; then
    "$PYTHON" manage.py migrate --noinput
    "$PYTHON" manage.py collectstatic --noinput -v0
  fi
fi

# Ray must advertise an address the other containers can reach; detect it the way Ray does.
if [ "$ray_node" = 1 ] && [ -z "${ARGUS_NODE_IP:-}" ]; then
  ARGUS_NODE_IP="$("$PYTHON" -c 'from raypool.config import detect_node_ip; print(detect_node_ip())')"
  export ARGUS_NODE_IP
fi

# raynode signs nothing (no sessions, no tokens), but Django's settings refuse to load without a
# key: a throwaway one is enough for it. A container that also runs the API must be given a real
# ARGUS_SECRET_KEY, or every restart logs its users out.
if [ "$ray_node" = 1 ] && [ -z "${ARGUS_SECRET_KEY:-}" ]; then
  ARGUS_SECRET_KEY="$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(50))')"
  export ARGUS_SECRET_KEY
fi

run_dir="${ARGUS_RUN_DIR:-/run/argus}"
mkdir -p "$run_dir"
if [ -n "${ARGUS_LOG_DIR:-}" ]; then
  mkdir -p "$ARGUS_LOG_DIR"
  supervisord_log="$ARGUS_LOG_DIR/supervisord-$role.log"
  supervisord_log_maxbytes=50MB
else
  # In the foreground supervisord already echoes its own log to stdout.
  supervisord_log=/dev/null
  supervisord_log_maxbytes=0
fi

conf="$run_dir/supervisord.conf"
{
  cat <<EOF
[supervisord]
nodaemon=true
logfile=$supervisord_log
logfile_maxbytes=$supervisord_log_maxbytes
pidfile=$run_dir/supervisord.pid
childlogdir=$run_dir

[unix_http_server]
file=$run_dir/supervisor.sock
chmod=0700

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://$run_dir/supervisor.sock

EOF
  case "$role" in
    head | worker) "$PYTHON" manage.py raynode supervisor-config --role "$role" ;;
    web)
      cat <<EOF
[program:argus-web]
command=$PYTHON -m gunicorn argus_site.wsgi -c deploy/gunicorn.conf.py
directory=$PWD
autorestart=true
startsecs=5
stopsignal=TERM
stopwaitsecs=35
stdout_logfile=/dev/stdout
stdout_logfile_maxbytes=0
redirect_stderr=true

[program:argus-sftpd]
command=$PYTHON manage.py sftpd
directory=$PWD
autorestart=true
startsecs=5
stopsignal=TERM
stopwaitsecs=35
stdout_logfile=/dev/stdout
stdout_logfile_maxbytes=0
redirect_stderr=true
EOF
      ;;
    scheduler)
      # SIGTERM to qcluster's main process only: it then stops its workers between tasks. A
      # SIGTERM to the whole group would kill a worker in the middle of a tick (RAY_NOTES.md).
      cat <<EOF
[program:argus-scheduler]
command=$PYTHON manage.py qcluster
directory=$PWD
autorestart=true
startsecs=5
stopsignal=TERM
stopasgroup=false
killasgroup=true
stopwaitsecs=60
stdout_logfile=/dev/stdout
stdout_logfile_maxbytes=0
redirect_stderr=true

[program:argus-webhooks]
command=$PYTHON manage.py sendwebhooks
directory=$PWD
autorestart=true
startsecs=5
stopsignal=TERM
stopasgroup=false
killasgroup=true
stopwaitsecs=60
stdout_logfile=/dev/stdout
stdout_logfile_maxbytes=0
redirect_stderr=true
EOF
      ;;
  esac
} >"$conf"

if [ "${ARGUS_ENTRYPOINT_DRY_RUN:-}" = "1" ]; then
  cat "$conf"
  exit 0
fi
exec supervisord -c "$conf"
