from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    """Hashed, compressed names after `collectstatic` (production); plain names before it
    (development and tests, where WhiteNoise serves straight from the finders), instead of an
    error for every asset."""

    manifest_strict = False

    def stored_name(self, name: str) -> str:
        try:
            stored: str = super().stored_name(name)  # whitenoise has no types
            return stored
        except ValueError:
            return name
