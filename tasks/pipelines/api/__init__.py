"""The pipeline API: /api/v2/pipelines (argus_site.urls includes its urls.py beside the tasks API)."""
