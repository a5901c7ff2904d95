"""The sweep pages: the list and a sweep's page (routed in argus_site.web_urls)."""
