"""Module paths users imported before the layout of issue 13 still work, with a
`DeprecationWarning` that names the new place, and give the same objects."""

import importlib

import pytest


MOVED = [
    ("costmodel.api", "evaluate", "costmodel.evaluation"),
    ("costmodel.api", "size_system", "costmodel.evaluation"),
    ("costmodel.economics_io", "economics_preset", "costmodel.io"),
    ("costmodel.economics_io", "chip_node", "costmodel.io"),
    ("costmodel.provenance", "provenance", "costmodel.report.provenance"),
    ("costmodel.pipeline", "run_main_job", "costmodel.report.main_job"),
]


@pytest.mark.parametrize("old, name, new", MOVED)
def test_old_path_warns_and_gives_the_same_object(old, name, new):
    module = importlib.import_module(old)  # importing alone does not warn
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError):
        importlib.import_module("costmodel.economics_io").add_economics_args  # moved to the CLI
