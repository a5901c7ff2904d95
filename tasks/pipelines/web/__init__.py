"""The pipeline pages: the list and a pipeline's page (routed in argus_site.web_urls)."""
