#!/usr/bin/env bash
# `make run`: migrate, a first admin with a token, and the web service.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var
if [ ! -f var/secret-key ]; then
  (umask 077; .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(50))' > var/secret-key)
fi
export ARGUS_SECRET_KEY="${ARGUS_SECRET_KEY:-$(cat var/secret-key)}"
PY=.venv/bin/python
$PY manage.py migrate --noinput
if ! $PY manage.py argus_user exists admin 2>/dev/null; then
  password=$($PY -c 'import secrets; print(secrets.token_urlsafe(12))')
  printf '%s' "$password" | $PY manage.py argus_user create admin --admin --password-stdin
  (umask 077; $PY manage.py argus_token issue admin --name make-run > var/admin-token)
  echo "First admin: admin / $password"
fi
echo "Admin token: $(cat var/admin-token)"
PORT="${ARGUS_PORT:-8000}"
echo "Argus: http://127.0.0.1:$PORT/"
exec .venv/bin/gunicorn argus_site.wsgi --bind "127.0.0.1:$PORT" --workers 2
