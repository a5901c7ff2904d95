"""The accounts API (/api/v2): users and tokens (views), one's own files (files); serializers, urls."""
