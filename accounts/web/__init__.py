"""The account and data pages."""
