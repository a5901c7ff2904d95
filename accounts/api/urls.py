from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from accounts.api import views
from accounts.groups.api import GroupViewSet
from accounts.sshkeys.api import MySshKeyViewSet
from accounts.users import USERNAME_PATTERN

# No trailing slashes (/api/v2/users), and SimpleRouter rather than DefaultRouter, whose
# format suffixes (".json") would clash with the dots a username may hold.
router = SimpleRouter(trailing_slash=False)
router.register("users", views.UserViewSet, basename="user")
router.register(rf"users/(?P<username>{USERNAME_PATTERN})/tokens", views.UserTokenViewSet, basename="user-token")
router.register("me/tokens", views.MyTokenViewSet, basename="my-token")
router.register("me/secrets", views.MySecretViewSet, basename="my-secret")
router.register("me/ssh-keys", MySshKeyViewSet, basename="my-ssh-key")
router.register("groups", GroupViewSet, basename="group")

app_name = "accounts-api"

urlpatterns = [
    path("me", views.MeView.as_view(), name="me"),
    *router.urls,
]
