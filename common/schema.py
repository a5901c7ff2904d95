"""How the OpenAPI schema (drf-spectacular) names and groups the operations, and what it tidies:
the schema is what a user's generated client is made from."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from drf_spectacular import openapi

if TYPE_CHECKING:
    from drf_spectacular.generators import SchemaGenerator
    from rest_framework.request import Request

# drf-spectacular's verbs for a route's methods, as a client's function names read them.
VERBS = {
    "list": "list",
    "retrieve": "get",
    "create": "create",
    "update": "replace",
    "partial_update": "update",
    "destroy": "delete",
}


class AutoSchema(openapi.AutoSchema):
    """Operation ids a generated client reads as its functions (`tasks_cancel`, `me_tokens_delete`,
    not `v2_tasks_cancel_create`), each operation tagged with its concept (tasks, pipelines,
    tokens…, not all `v2`). The path's words come after SCHEMA_PATH_PREFIX."""

    def get_tags(self) -> list[str]:
        words = self._tokenize_path()
        # /me is the caller's account: what hangs under it (tokens, secrets, webhooks) is a concept.
        return words[1:2] if words[:1] == ["me"] and len(words) > 1 else words[:1]

    def get_operation_id(self) -> str:
        words = [word.replace("-", "_") for word in self._tokenize_path()]
        if self._is_one_verb_action():
            return "_".join(words)  # the action's URL word is its verb: tasks_cancel, tasks_logs
        is_list = self.method == "GET" and self._is_list_view()
        verb = "list" if is_list else VERBS[self.method_mapping[self.method.lower()]]
        return "_".join([*words, verb])

    def _is_one_verb_action(self) -> bool:
        """A viewset's extra action (@action) that answers one method only."""
        action = getattr(self.view, "action", None)
        mapping = getattr(getattr(self.view, action, None), "mapping", None) if action else None
        return mapping is not None and len(mapping) == 1


BLANK = {"type": "string", "maxLength": 0}


def merge_blank_branches(
    result: dict[str, Any], generator: SchemaGenerator, request: Request | None, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: a string that may be blank and has a pattern is
    written `oneOf: [{pattern…}, {maxLength: 0}]`; where the pattern admits "" itself, "" matches
    both branches, which oneOf forbids (the files `path`). Such a string is its first branch alone."""
    stack: list[object] = [result]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        branches = node.get("oneOf")
        if isinstance(branches, list) and len(branches) == 2 and branches[1] == BLANK:
            pattern = branches[0].get("pattern")
            if pattern is not None and re.search(pattern, "") is not None:
                del node["oneOf"]
                node.update(branches[0])
        stack.extend(node.values())
    return result
