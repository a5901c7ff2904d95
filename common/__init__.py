"""The kit below every app: the API's error shape, parsers and exceptions, the admin's
changed-fields save, JSON logging, the CSP header, static files storage, durations."""
