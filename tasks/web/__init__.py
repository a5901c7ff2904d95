"""The tasks pages: views, and the context every page gets."""
