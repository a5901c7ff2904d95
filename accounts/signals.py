from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from accounts.homes import ensure_home
from accounts.users import validate_username


@receiver(pre_save, sender=get_user_model())
def refuse_unsafe_username(sender: type[User], instance: User, **kwargs: Any) -> None:
    # The last line of defence for paths that skip our forms (createsuperuser, the shell):
    # the username is about to become a directory name, so "../x" must never get that far.
    if instance._state.adding:
        validate_username(instance.username)


@receiver(post_save, sender=get_user_model())
def create_home(sender: type[User], instance: User, created: bool, **kwargs: Any) -> None:
    # A signal, not a call in each path: users come from the API, the commands, the admin
    # site and createsuperuser alike, and every one of them needs a home.
    if created:
        ensure_home(instance.username)
