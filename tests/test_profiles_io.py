"""Access profiles as data: the shipped presets, profile files, and their errors."""

import math
import re

import jax
import numpy as np
import pytest

import costmodel as cm
from costmodel.io import InputError
from costmodel.io.profiles import (
    N_EDGES,
    PROFILE_FIELDS,
    ProfileInfo,
    check_profile,
    load_profiles,
    profile_info,
    profile_presets,
    profiles_path,
)


def _leaves(profile):
    return [np.asarray(x) for x in jax.tree.leaves(profile)]


def _same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(_leaves(a), _leaves(b), strict=True))


def _write(tmp_path, text, name="user.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _toml_value(v):
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return '"' + v + '"'
    return "inf" if v == math.inf else repr(float(v))


def _profile_text(table, section="profiles.mine"):
    return f"[{section}]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in table.items())


# --- the shipped presets ----------------------------------------------------------------


def test_every_preset_loads_and_builds_an_access_profile():
    presets = profile_presets()
    assert {"dense", "window-sinks", "topk", "heavy-hitters", "idle-multiturn", "speculative"} <= set(presets)
    loaded = load_profiles()
    assert set(loaded) == set(presets)
    for name in presets:
        info = profile_info(name)
        assert isinstance(info, ProfileInfo) and isinstance(info.profile, cm.AccessProfile)
        assert info.name == name and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name)
        assert info.description and info.source, f"{name}: a preset says what it is and cites its numbers"
        assert str(profiles_path()) in info.where
        assert _same(info.profile, loaded[name].profile)
        check_profile(info, 4096)  # every preset fits the default context


def test_dense_preset_equals_the_default_profile_leaf_by_leaf():
    assert _same(profile_info("dense").profile, cm.AccessProfile())


def test_preset_numbers_are_the_cited_ones():
    p = {name: profile_info(name).profile for name in profile_presets()}
    w = p["window-sinks"]
    assert (float(w.sink_tokens), float(w.recent_tokens), float(w.kept_fraction)) == (4, 2044, 0)
    t = p["topk"]  # Quest: a 2048-token budget of 16-token pages, the newest one included
    assert float(t.recent_tokens) == 16 and float(t.recent_tokens + t.budget_tokens) == 2048
    assert float(t.kept_fraction) == 1
    h = p["heavy-hitters"]  # H2O: 20% of the context, half recent, half heavy hitters
    assert float(h.recent_fraction) == pytest.approx(0.1) and float(h.kept_fraction) == pytest.approx(0.1)
    assert float(h.budget_tokens) == math.inf
    assert float(p["idle-multiturn"].idle_sequences) > 0
    s = p["speculative"]  # k = 4 drafts, acceptance rate 0.75 (Leviathan et al. Table 3)
    k, a = 4, 0.75
    assert float(s.queries) == k + 1
    assert float(s.accepted) == pytest.approx(float(f"{(1 - a ** (k + 1)) / (1 - a):.3g}"))


# --- bad input: one line naming the file, the field and the value -----------------------


BAD = [
    ("kept_fraction = 1.5", "kept_fraction", "1.5"),
    ("recent_fraction = -0.1", "recent_fraction", "-0.1"),
    ('kept_fraction = "half"', "kept_fraction", "'half'"),
    ("sink_tokens = true", "sink_tokens", "True"),
    ("recent_tokens = -16", "recent_tokens", "-16"),
    ("budget_tokens = -1", "budget_tokens", "-1"),
    ("budget_tokens = nan", "budget_tokens", "nan"),
    ("idle_sequences = 1e16", "idle_sequences", "1e+16"),
    ("queries = 0.5", "queries", "0.5"),
    ("queries = 5\naccepted = 6", "accepted", "6"),
    ("accepted = 2", "accepted", "2"),  # queries defaults to 1
    ("edges = [256, 512, 512]", "edges[2]", "512"),
    ("edges = [1024, 256]", "edges[1]", "256"),
    ("edges = [256, inf, 1024]", "edges[1]", "inf"),
    ("edges = [0, 256]", "edges[0]", "0"),
    ('edges = [256, "512"]', "edges[1]", "'512'"),
    ("edges = 256", "edges", "256"),
    (f"edges = [{', '.join(str(256 * 2**i) for i in range(N_EDGES + 1))}]", "edges", "15 edges"),
    ("kepd_fraction = 0.5", "kepd_fraction", "unknown field"),
    ("source = 3", "source", "3"),
]


@pytest.mark.parametrize(
    "line, field, value", BAD, ids=[b[0].split("=")[0].strip() + str(i) for i, b in enumerate(BAD)]
)
def test_bad_field_raises_one_line_naming_file_field_value(tmp_path, line, field, value):
    path = _write(tmp_path, f"[profiles.bad]\n{line}\n")
    for load in (load_profiles, profile_info):
        with pytest.raises(InputError) as e:
            load(str(path))
        msg = str(e.value)
        assert "\n" not in msg
        assert msg.startswith(f"{path}: profiles.bad.{field}"), msg
        assert value in msg and "expected" in msg, msg


def test_budget_larger_than_the_history_raises(tmp_path):
    path = _write(tmp_path, "[profile]\nbudget_tokens = 8192\n", "big.toml")
    info = profile_info(str(path))
    check_profile(info, 8192)  # equal is fine
    with pytest.raises(InputError) as e:
        check_profile(info, 4096)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: profile.budget_tokens = 8192: expected"), msg
    assert "4096" in msg
    with pytest.raises(InputError, match=r"budget_tokens = 8192: .*min\(window, context\) = 4096"):
        check_profile(info, 32768, window=4096)  # a model whose every layer slides
    with pytest.raises(InputError, match=r"^profile\.budget_tokens = 8192"):
        check_profile(info.profile, 4096)  # a bare AccessProfile


def test_sinks_and_recent_tokens_beyond_the_history_raise(tmp_path):
    info = profile_info("window-sinks")  # 4 + 2044
    check_profile(info, 2048)
    with pytest.raises(InputError) as e:
        check_profile(info, 2000)
    msg = str(e.value)
    assert msg.startswith(f"{profiles_path()}: profiles.window-sinks.recent_tokens = 2044: expected"), msg
    assert "2048" in msg and "2000" in msg
    path = _write(tmp_path, "[profile]\nsink_tokens = 64\n", "sinks.toml")
    with pytest.raises(InputError, match=r"profile\.sink_tokens = 64: expected at most the context, 32 tokens"):
        check_profile(profile_info(str(path)), 32)


def test_unknown_profile_name_lists_the_known_ids():
    with pytest.raises(InputError) as e:
        profile_info("no-such-profile")
    msg = str(e.value)
    assert "'no-such-profile'" in msg and "\n" not in msg
    for name in profile_presets():
        assert repr(name) in msg


# --- user files -------------------------------------------------------------------------


def test_a_user_file_round_trips(tmp_path):
    table = {
        "description": "mine",
        "source": "a test",
        "sink_tokens": 8.0,
        "recent_tokens": 512.0,
        "recent_fraction": 0.05,
        "kept_fraction": 0.5,
        "budget_tokens": 1024.0,
        "idle_sequences": 3.0,
        "queries": 3.0,
        "accepted": 2.5,
        "edges": [128.0, 1024.0, 65536.0],
    }
    path = _write(tmp_path, _profile_text(table))
    info = profile_info(str(path))
    assert (info.name, info.description, info.source) == ("mine", "mine", "a test")
    numbers = {k: v for k, v in table.items() if k in PROFILE_FIELDS}
    numbers["edges"] = np.array(table["edges"] + [math.inf] * (N_EDGES - 3))
    assert _same(info.profile, cm.AccessProfile(**numbers))
    # written back from the loaded profile (as a [profile] table) it loads the same
    prof = info.profile
    back = {k: np.asarray(getattr(prof, k)).tolist() for k in PROFILE_FIELDS}
    again = profile_info(str(_write(tmp_path, _profile_text(back, "profile"), "again.toml")))
    assert again.name == "again" and _same(again.profile, prof)
    assert _same(load_profiles(str(path))["mine"].profile, prof)


def test_inf_budget_and_padded_edges_are_accepted(tmp_path):
    path = _write(tmp_path, "[profile]\nbudget_tokens = inf\nedges = [100, 200, inf, inf]\n")
    prof = profile_info(str(path)).profile
    assert float(prof.budget_tokens) == math.inf
    assert np.asarray(prof.edges).tolist() == [100.0, 200.0] + [math.inf] * (N_EDGES - 2)
    assert (
        np.asarray(profile_info(str(_write(tmp_path, "[profile]\nedges = []\n", "one.toml"))).profile.edges).tolist()
        == [math.inf] * N_EDGES
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "[profiles.a]\nqueries = 2\n[profiles.b]\nqueries = 3\n",
            r"\[profiles\] holds 2 profiles \['a', 'b'\]: expected exactly one",
        ),
        ("[profiles]\n", r"holds 0 profiles"),
        ("[profile]\nqueries = 2\n[profiles.a]\nqueries = 3\n", r"both \[profile\] and \[profiles\]"),
        ("[profil]\nqueries = 2\n", r"unknown field 'profil'"),
        ("[profile]\nqueries = 2\n[chip]\nname = 'x'\n", r"unknown field 'chip'"),
        ("profile = 3\n", r"profile: expected a table"),
        ("[profile\n", r"not valid TOML"),
    ],
)
def test_a_profile_file_holds_exactly_one_profile(tmp_path, text, expected):
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match=expected) as e:
        profile_info(str(path))
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_a_missing_profile_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        profile_info(str(tmp_path / "nope.toml"))
    with pytest.raises(InputError, match=r"non-empty \[profiles\] table"):
        load_profiles(_write(tmp_path, "[profiles]\n", "empty.toml"))
