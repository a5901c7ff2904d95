"""The webhooks API (/api/v2/me/webhooks): views, serializers, urls."""
