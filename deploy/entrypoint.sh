#!/usr/bin/env bash
# The node image's entrypoint: one image, the role from ARGUS_ROLE (head | worker).
# Writes a supervisord config whose program runs `manage.py raynode <role>`, then runs
# supervisord in the foreground. Every setting comes from the environment (SPEC §7).
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
  head | worker) ;;
  *)
    echo "entrypoint: ARGUS_ROLE must be head or worker, not '${role}'" >&2
    exit 2
    ;;
esac

# Ray must advertise an address the other containers can reach; detect it the way Ray does.
if [ -z "${ARGUS_NODE_IP:-}" ]; then
  ARGUS_NODE_IP="$("$PYTHON" -c 'from raypool.config import detect_node_ip; print(detect_node_ip())')"
  export ARGUS_NODE_IP
fi

# raynode signs nothing (no sessions, no tokens), but Django's settings refuse to load without a
# key: a throwaway one is enough for it. A container that also runs the API must be given a real
# ARGUS_SECRET_KEY, or every restart logs its users out.
if [ -z "${ARGUS_SECRET_KEY:-}" ]; then
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
  "$PYTHON" manage.py raynode supervisor-config --role "$role"
  # The head container will also run the API (gunicorn) and the scheduler (qcluster): their
  # [program:…] sections are to be appended here, for role=head, when those land.
} >"$conf"

if [ "${ARGUS_ENTRYPOINT_DRY_RUN:-}" = "1" ]; then
  cat "$conf"
  exit 0
fi
exec supervisord -c "$conf"
