"""The tasks API (/api/v2): tasks (views), the queue and the cluster (cluster), the admission
pause (pause), /metrics (metrics); their serializers, filters, parsers and urls."""
