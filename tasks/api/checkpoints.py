"""The task API's checkpoints (issue 28 items 2 and 4): ``GET /api/v2/tasks/ID/checkpoints``
lists them with their sizes, ``DELETE /api/v2/tasks/ID/checkpoints/STEP`` removes a finished
task's (tasks.checkpoints)."""

from __future__ import annotations

from rest_framework import serializers

from tasks.checkpoints.listing import Listing


class CheckpointSerializer(serializers.Serializer[None]):
    step = serializers.IntegerField()
    bytes = serializers.IntegerField(help_text="Its size on shared storage.")
    path = serializers.CharField(help_text="The global_step_N folder.")
    latest = serializers.BooleanField(help_text="The newest complete one (verl's tracker names it).")
    needed_by = serializers.ListField(
        child=serializers.CharField(), help_text="Who needs it: it is not deleted while they do."
    )


class CheckpointsSerializer(serializers.Serializer[None]):
    keep_checkpoints = serializers.IntegerField(allow_null=True, help_text="The spec's bound (0: keep all).")
    keep_best = serializers.DictField(child=serializers.CharField(), allow_null=True)
    latest = serializers.IntegerField(allow_null=True)
    total_bytes = serializers.IntegerField()
    checkpoints = CheckpointSerializer(many=True)
    unread = serializers.CharField(help_text="Why the folder could not be read now; empty when it was.")


class DeletedSerializer(serializers.Serializer[None]):
    step = serializers.IntegerField()
    bytes = serializers.IntegerField(help_text="The bytes freed.")


def listing_body(found: Listing) -> dict[str, object]:
    return {
        "keep_checkpoints": found.keep_checkpoints,
        "keep_best": found.keep_best,
        "latest": found.latest,
        "total_bytes": found.total_bytes,
        "checkpoints": [
            {
                "step": listed.step,
                "bytes": listed.bytes,
                "path": listed.path,
                "latest": listed.latest,
                "needed_by": list(listed.needed_by),
            }
            for listed in found.checkpoints
        ],
        "unread": found.unread,
    }
