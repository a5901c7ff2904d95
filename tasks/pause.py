"""The admission pause: operators stop Argus from starting new work (before maintenance, say)
while what runs on Ray goes on. One row; the scheduler reads it each tick, every page shows it."""

from __future__ import annotations

import logging

from django.db import models, transaction
from django.utils import timezone

from tasks.lease import request_tick

logger = logging.getLogger(__name__)

DEFAULT = "default"
REASON_MAX = 500


class AdmissionControl(models.Model):
    name = models.CharField(max_length=40, unique=True, default=DEFAULT)
    paused = models.BooleanField(default=False, help_text="While paused, no waiting task starts.")
    reason = models.CharField(max_length=REASON_MAX, blank=True)
    changed_by = models.CharField(max_length=160, blank=True, help_text="api:<user>, admin:<user>…")
    changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "admission control"
        verbose_name_plural = "admission control"

    def __str__(self) -> str:
        return f"admission paused: {self.reason}" if self.paused else "admission open"

    @classmethod
    def current(cls) -> AdmissionControl:
        """The state now; before anyone changed it, an unsaved default that is not paused."""
        return cls.objects.filter(name=DEFAULT).first() or cls(name=DEFAULT)

    @classmethod
    def set(cls, paused: bool, reason: str, actor: str) -> AdmissionControl:
        """Pause or resume admission. A pause always says why, if only who paused it (the
        banner and the waiting tasks show the reason); resuming clears it."""
        reason = reason.strip()
        if not paused:
            reason = ""
        elif not reason:
            reason = f"paused by {actor}"[:REASON_MAX]
        fields = {"paused": paused, "reason": reason, "changed_by": actor, "changed_at": timezone.now()}
        with transaction.atomic():
            state, _ = cls.objects.update_or_create(name=DEFAULT, defaults=fields)
            if not paused:
                # The scheduler's run ends when nothing is left to follow, and the periodic
                # safety net restarts it only each minute: the waiting tasks need not wait.
                request_tick()
        logger.info("Admission %s by %s%s", "paused" if paused else "resumed", actor, f": {reason}" if paused else "")
        return state
