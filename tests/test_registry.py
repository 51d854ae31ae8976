"""What `registry` promises: a name registered twice is an error naming both definitions (the first stays);
an empty name is refused; an unknown name lists the sorted choices and where plugins come from; a metric's
scale is checked; a task class learns its name; a plugin file registers once (loading it again is a no-op),
one that fails is an error naming it and is not half-registered; a failed discovery fails every later
lookup alike."""

import pytest

from structseq import registry
from structseq.errors import ConfigError
from structseq.registry import Registry, RegistryError, register_metric, register_task


def first():
    pass


def second():
    pass


def test_a_name_registered_twice_names_both_and_keeps_the_first():
    reg = Registry("widget", "model.widget")
    reg._items["a"] = first  # no discovery needed for a private registry's contents
    with pytest.raises(RegistryError, match=r"widget 'a' is registered twice: by .*\.first and by .*\.second"):
        reg.add("a", second)
    assert reg._items["a"] is first
    for bad in ("", None, 3):
        with pytest.raises(RegistryError, match="non-empty name"):
            reg.add(bad, second)


def test_unknown_names_list_the_sorted_choices_and_the_plugin_variable():
    reg = Registry("widget", "model.widget")
    for name in ("zeta", "alpha", "mid"):
        reg.add(name, first)
    with pytest.raises(ConfigError) as e:
        reg.get("beta")
    assert str(e.value) == (
        "'model.widget': unknown widget 'beta'; choices: alpha, mid, zeta (plugin modules are loaded from "
        "$STRUCTSEQ_PLUGINS)"
    )
    assert reg["mid"] is first and "alpha" in reg and "beta" not in reg and len(reg) == 3
    reg.remove("mid")
    assert reg.names() == ["zeta", "alpha"]


def test_metric_scales_are_checked_and_tasks_learn_their_names():
    with pytest.raises(RegistryError, match="scale must be one of fraction, percent, not 'ratio'"):
        register_metric("w43b-bad-scale", scale="ratio")
    assert "w43b-bad-scale" not in registry.METRICS

    @register_task("w43b-task")
    class Task:
        pass

    try:
        assert Task.name == "w43b-task" and registry.TASKS.get("w43b-task") is Task
    finally:
        registry.TASKS.remove("w43b-task")


def test_a_plugin_file_registers_once_and_a_broken_one_is_named(tmp_path):
    good = tmp_path / "good_plugin.py"
    good.write_text(
        "from structseq.registry import register_learner\n\n"
        "@register_learner('w43b-learner')\ndef learn(pairs, **kw):\n    return None\n"
    )
    try:
        registry._import_plugin(str(good))
        registry._import_plugin(str(good))  # already loaded: not registered twice
        assert "w43b-learner" in registry.LEARNERS
    finally:
        registry.LEARNERS.remove("w43b-learner")
    bad = tmp_path / "bad_plugin.py"
    bad.write_text(
        "from structseq.registry import register_learner\n\n"
        "@register_learner('w43b-half')\ndef learn(pairs, **kw):\n    return None\n\nraise RuntimeError('boom')\n"
    )
    try:
        for _ in range(2):  # not left half-loaded in sys.modules: the second try fails the same way
            with pytest.raises(ConfigError, match=r"bad_plugin.py.*boom"):
                registry._import_plugin(str(bad))
            registry.LEARNERS.remove("w43b-half")
    finally:
        registry.LEARNERS.remove("w43b-half")
    with pytest.raises(ConfigError, match="plugin file not found: .*nope.py"):
        registry._import_plugin(str(tmp_path / "nope.py"))
    with pytest.raises(ConfigError, match="cannot import plugin module 'w43b_no_such_module'"):
        registry._import_plugin("w43b_no_such_module")


def test_a_failed_discovery_fails_every_later_lookup(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "_discovered", False)
    monkeypatch.setattr(registry, "_failure", None)
    monkeypatch.setenv(registry.PLUGINS_ENV, str(tmp_path / "missing.py"))
    for _ in range(2):
        with pytest.raises(ConfigError, match="plugin file not found"):
            registry.ARCHS.get("transformer")


def test_each_kind_is_registered_within_its_own_packages():
    """A kind's listing imports only its own packages (`Registry.packages`), so every built-in registration of
    the kind must be made there; and a lookup of one name imports the module `_index` reads it from."""
    kinds = [r for r in vars(registry).values() if isinstance(r, Registry)]
    from structseq.data.dataset import DATASETS

    kinds.append(DATASETS)
    by_decorator = {r.decorator: r for r in kinds}
    assert len(by_decorator) == len(kinds) and None not in by_decorator
    index = registry._index()
    assert ("register_arch", "transformer") in index and ("register_learner", "ibm1") in index
    for (decorator, name), module in index.items():
        kind = by_decorator.get(decorator)
        if kind is not None and name in kind:  # a docstring's example ("my-search") is no registration
            assert any(module == p or module.startswith(p + ".") for p in kind.packages), (decorator, name, module)
    for kind in kinds:
        assert set(kind.packages) <= set(registry.BUILTIN), kind.kind
