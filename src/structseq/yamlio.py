"""YAML for configs: safe loading where a key given twice is an error (PyYAML silently keeps the last)."""

from __future__ import annotations

import yaml

from structseq.errors import ConfigError


class _StrictLoader(yaml.SafeLoader):
    pass


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        try:
            if key in seen:
                raise ConfigError(f"{line}: duplicate key '{key}' (first given on line {seen[key]})")
            seen[key] = line
        except TypeError:  # an unhashable key: PyYAML reports it
            pass
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_yaml(text: str, where: object = "config") -> object:
    """Parse YAML text; syntax errors and duplicate keys are ConfigErrors naming `where` (and the line)."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as e:
        raise ConfigError(f"{where}:{e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{where}{at}: not valid YAML ({' '.join(str(problem).split())})") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as e:  # e.g. a bad timestamp, a deep nest
        raise ConfigError(f"{where}: not valid YAML ({type(e).__name__}: {e})") from None
