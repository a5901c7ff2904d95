"""gunicorn settings for Argus (`gunicorn argus_site.wsgi -c deploy/gunicorn.conf.py`)."""

from __future__ import annotations

import os

bind = os.environ.get("ARGUS_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("ARGUS_WEB_WORKERS", "2"))
# Threads: a followed log (`/logs?follow=1`) holds its thread for as long as the job runs.
worker_class = "gthread"
threads = int(os.environ.get("ARGUS_WEB_THREADS", "8"))
timeout = 120
graceful_timeout = 30
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = os.environ.get("ARGUS_FORWARDED_ALLOW_IPS", "127.0.0.1")
