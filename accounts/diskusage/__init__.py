"""How much of the shared storage each user fills (their home, jobs included), measured off the
scheduler's tick by a periodic django-q2 job (``scan.measure_all``), and read by the API, the
pages, the admin site and /metrics (``usage``)."""
