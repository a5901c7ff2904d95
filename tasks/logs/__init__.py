"""Driver logs: reading them for people (read), what the scheduler reads in them (driverlog),
training curves (curves), and the one reading of a log line (lines)."""
