"""Usage accounting (issue 27 item 5): a ledger of every ended attempt's GPU-seconds by user
and group, and the reports read from it (the API, the CLI)."""
