"""Parse a YAML file a user hands us (a codebook) safely: duplicate keys and alias bombs refused.

`yaml.safe_load` keeps the last of two equal keys silently (a second `symptom:` dimension drops
the first) and builds a "billion laughs" document of aliases in no time, which any later `str()`
or walk over it then expands to gigabytes. Here the node graph is checked before it becomes
Python objects: every mapping's keys are unique (the error names both lines), and the document,
with every alias expanded, has at most MAX_NODES nodes.
"""

from __future__ import annotations

from typing import Any

import yaml

# A codebook of 50 categories is ~1,500 nodes; anything near this bound is an alias bomb.
MAX_NODES = 200_000
MERGE_TAG = "tag:yaml.org,2002:merge"


def _expanded_size(node: yaml.Node, sizes: dict[int, int], stack: set[int]) -> int:
    """Nodes in `node` with every alias expanded; memoised, so a bomb is measured in linear time."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in stack:  # a recursive alias: expanding it never ends
        return MAX_NODES + 1
    stack.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, sizes, stack)
            if total > MAX_NODES:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded_size(k, sizes, stack) + _expanded_size(v, sizes, stack)
            if total > MAX_NODES:
                break
    stack.discard(key)
    sizes[key] = total
    return total


def _duplicate_key(node: yaml.Node, seen_nodes: set[int]) -> str | None:
    """`key 'x' at line 9 repeats line 4` for the first mapping with a repeated key, else None."""
    todo = [node]
    while todo:
        n = todo.pop()
        if id(n) in seen_nodes:
            continue
        seen_nodes.add(id(n))
        if isinstance(n, yaml.MappingNode):
            keys: dict[tuple[str, str], yaml.Node] = {}
            for k, v in n.value:
                todo.append(v)
                if not isinstance(k, yaml.ScalarNode) or k.tag == MERGE_TAG:
                    continue
                first = keys.setdefault((k.tag, k.value), k)
                if first is not k:  # the same line too: `{name: A, name: B}`
                    at, was = k.start_mark, first.start_mark
                    where = f"line {was.line + 1}" if was.line != at.line else f"column {was.column + 1} of that line"
                    return f"line {at.line + 1}: key {k.value!r} repeats the one at {where} (YAML keeps only the last)"
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(n.value)
    return None


def load_yaml(text: str, source: str, error: type[Exception]) -> Any:
    """The single YAML document in `text` as Python objects; `error` naming `source` when it is not
    valid YAML, repeats a key, expands to more than MAX_NODES nodes or nests too deeply."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problem = _duplicate_key(node, set())
        if problem:
            raise error(f"{source}: {problem}")
        if _expanded_size(node, {}, set()) > MAX_NODES:
            raise error(
                f"{source}: the document expands to more than {MAX_NODES:,} values through its aliases "
                "(`*name`); a codebook needs far fewer"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise error(f"{source}: not valid YAML: {e}") from None
    except RecursionError:
        raise error(f"{source}: nested too deeply to be a codebook") from None
    finally:
        loader.dispose()
