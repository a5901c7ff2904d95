"""The sweep API: /api/v2/sweeps (argus_site.urls includes its urls.py beside the tasks API)."""
