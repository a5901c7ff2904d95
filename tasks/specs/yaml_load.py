"""The safe YAML loader a spec or pipeline document is read with, and the writer of a JSON body's
spec as YAML.

A document is held to the spec's limits before anything is built from it: its size, UTF-8, one
YAML document, no anchors or aliases, no nesting deeper than MAX_YAML_DEPTH, no duplicate keys and
no lone surrogates. Every refusal is a SpecError of the whole document.
"""

from __future__ import annotations

from typing import Any

import yaml
from django.conf import settings

from tasks.specs.errors import whole

# A spec is a flat mapping; anything nested deeper is a mistake or an attack on the parser.
MAX_YAML_DEPTH = 16


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases, deep nesting and duplicate keys.

    Aliases are how a few hundred bytes ("billion laughs") expand into gigabytes once
    constructed; a spec never needs them, so the first anchor or alias stops the parse before
    anything is built. The pure-Python loader is used because the C one composes nodes in C,
    out of reach of these checks; specs are at most 64 KiB, so speed does not matter.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.composer.ComposerError(
                None, None, "YAML anchors and aliases (&name, *name) are not allowed", event.start_mark
            )
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", event.start_mark
                )
            node = super().compose_node(parent, index)
            assert node is not None  # composing after a node event always yields one
            return node
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # PyYAML keeps the last of two equal keys; a spec saying `nnodes` twice is ambiguous.
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if (key_node.tag, key_node.value) in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add((key_node.tag, key_node.value))
        return super().construct_mapping(node, deep=deep)


class _LiteralDumper(yaml.SafeDumper):
    """Dumps multi-line strings (an advanced command) as `|` blocks, the way people write them."""


_LiteralDumper.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None),
)


def dump_yaml(document: dict[str, Any]) -> str:
    """A mapping as YAML text, the way a JSON body's spec is kept (multi-line strings as blocks)."""
    return yaml.dump(document, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True)


def _at(mark: yaml.Mark | None) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def load_document(source: bytes | str | dict[str, Any]) -> tuple[str, Any]:
    """The raw text and the parsed YAML (or JSON) document, held to the spec's limits; SpecError
    otherwise. Specs and pipelines are read through it. Steps: 1. size; 2. UTF-8; 3. YAML, one
    document."""
    limit = settings.ARGUS_MAX_SPEC_BYTES
    too_large = f"the spec is larger than {limit} bytes"
    data: Any = None
    if isinstance(source, dict):
        # A JSON body is already parsed: hold it to the YAML loader's depth limit before yaml.dump
        # recurses through it (900 levels overflow the stack).
        if _deeper_than(source, MAX_YAML_DEPTH):
            raise whole(f"nested deeper than {MAX_YAML_DEPTH} levels")
        try:
            raw = yaml.dump(source, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True)
        except (yaml.YAMLError, ValueError) as exc:
            # ValueError: an integer too long for Python to write out (sys.get_int_max_str_digits).
            raise whole(f"cannot be written as YAML: {exc}") from exc
        data = source
    elif isinstance(source, bytes):
        # Measured before decoding, so an oversized body costs nothing more.
        if len(source) > limit:
            raise whole(too_large, "too_large")
        try:
            raw = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise whole(f"is not valid UTF-8 (byte 0x{source[exc.start]:02x} at offset {exc.start})") from exc
    else:
        raw = source
    try:
        size = len(raw.encode("utf-8"))
    except UnicodeEncodeError as exc:
        # A lone surrogate, as a JSON string can carry ("\ud800").
        raise whole(f"is not valid Unicode (character {exc.start})") from exc
    if size > limit:
        raise whole(too_large, "too_large")
    document = data if data is not None else _parse_yaml(raw)
    # YAML's "\udb7e" escapes and JSON's make lone surrogates out of valid text; a key holding
    # one could not even be written into the error response.
    surrogate = _lone_surrogate(document)
    if surrogate is not None:
        raise whole(f"is not valid Unicode: it holds a lone surrogate ({surrogate!a})")
    return raw, document


def _lone_surrogate(value: Any) -> str | None:
    """The first string (key or value) in ``value`` that is not valid Unicode, if any (no recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _deeper_than(value: Any, limit: int) -> bool:
    """True when lists and mappings inside ``value`` nest more than ``limit`` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _parse_yaml(text: str) -> Any:
    if not text.strip():
        raise whole("is empty")
    loader: _SpecLoader | None = None
    try:
        # Built inside the try: PyYAML's reader checks the whole text for characters YAML
        # forbids (C0/C1 controls) as the loader is made, raising ReaderError there.
        loader = _SpecLoader(text)
        # get_single_data(), spelled out so that a second document gets a message of its own.
        loader.get_event()  # StreamStartEvent
        if loader.check_event(yaml.StreamEndEvent):
            raise whole("is empty (only comments)")
        node = loader.compose_document()
        if not loader.check_event(yaml.StreamEndEvent):
            mark = loader.peek_event().start_mark
            raise whole(f"must be a single YAML document, but another one starts{_at(mark)}")
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or exc.context or "is not valid YAML"
        context = f" ({exc.context})" if exc.problem and exc.context else ""
        raise whole(f"invalid YAML{_at(exc.problem_mark or exc.context_mark)}: {problem}{context}") from exc
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise whole(f"invalid YAML at line {line}: character #x{exc.character:04x} is not allowed") from exc
    except yaml.YAMLError as exc:
        raise whole(f"invalid YAML: {exc}") from exc
    except ValueError as exc:
        # A scalar YAML types but Python cannot build: `2024-13-45`, an integer of 5,000 digits.
        raise whole(f"invalid YAML value: {exc}") from exc
    finally:
        if loader is not None:
            loader.dispose()
