"""Groups (teams, labs): who shares a quota of the cluster. The model, its rules, API and admin
live together here; issue 27."""
