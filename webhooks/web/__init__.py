"""The webhook panel of the account page."""
