"""Published names: portable pattern, prefix modes, deterministic shortening, collisions."""

from __future__ import annotations

import hashlib
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coretools.client.names import (
    NAME_PATTERN,
    collisions,
    describe_collisions,
    name_digest,
    publish_names,
    sanitize_part,
    should_prefix,
)

# Independent restatement of the portable rule (Gemini ∩ OpenAI ∩ Anthropic).
PORTABLE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_-]{0,63}\Z")


def test_the_pattern_is_the_portable_one() -> None:
    assert NAME_PATTERN.pattern == r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"


def test_prefixing_and_sanitising() -> None:
    names = publish_names([("fs", "read_file"), ("my server", "get.info"), ("git", "9lives"), ("a__b", "c__d")], prefixed=True)
    assert names[("fs", "read_file")] == "fs__read_file"
    assert names[("my server", "get.info")] == "my_server__get_info"
    assert names[("git", "9lives")] == "git__9lives"
    assert names[("a__b", "c__d")] == "a_b__c_d", "runs of '_' inside a half collapse, keeping '__' as the separator"
    assert publish_names([("fs", "read_file")], prefixed=False) == {("fs", "read_file"): "read_file"}
    assert publish_names([("x", "7up")], prefixed=False) == {("x", "7up"): "_7up"}
    assert publish_names([("x", "-dash")], prefixed=False) == {("x", "-dash"): "_-dash"}
    assert publish_names([("x", "")], prefixed=False) == {("x", ""): "_"}


def test_prefix_modes() -> None:
    assert should_prefix("auto", 2) and not should_prefix("auto", 1)
    assert should_prefix("always", 1) and not should_prefix("never", 5)
    with pytest.raises(ValueError, match="prefix must be one of"):
        should_prefix("sometimes", 1)  # type: ignore[arg-type]


def test_long_names_are_shortened_deterministically() -> None:
    alias, tool = "a-rather-long-server-alias", "an_exceedingly_long_tool_name_that_goes_on_and_on_forever"
    name = publish_names([(alias, tool)], prefixed=True)[(alias, tool)]
    expected_digest = hashlib.sha256(f"{alias}\0{tool}".encode()).hexdigest()[:8]
    assert len(name) == 64 and name.endswith("_" + expected_digest)
    assert name.startswith("a-rather-long-server-alias__an_exceedingly")
    assert publish_names([(alias, tool)], prefixed=True)[(alias, tool)] == name


def test_collisions_after_sanitising_all_get_a_hash() -> None:
    pairs = [("s", "get.file"), ("s", "get file"), ("s", "get_file")]
    names = publish_names(pairs, prefixed=False)
    assert len(set(names.values())) == 3
    for (alias, tool), name in names.items():
        assert name == f"get_file_{name_digest(alias, tool)}"


def test_same_tool_on_two_servers_without_prefix() -> None:
    names = publish_names([("a", "echo"), ("b", "echo")], prefixed=False)
    assert names[("a", "echo")] != names[("b", "echo")]
    assert all(n.startswith("echo_") for n in names.values())


def test_reserved_names_are_avoided() -> None:
    names = publish_names([("s", "search"), ("s", "other")], prefixed=False, reserved=["search"])
    assert names[("s", "search")] == f"search_{name_digest('s', 'search')}"
    assert names[("s", "other")] == "other"


def test_result_does_not_depend_on_listing_order() -> None:
    pairs = [("s", f"tool.{i % 7}") for i in range(20)] + [("s", f"tool_{i}") for i in range(7)] + [("t", "x" * 80)]
    expected = publish_names(pairs, prefixed=True)
    shuffled = pairs[:]
    random.Random(7).shuffle(shuffled)
    assert publish_names(shuffled, prefixed=True) == expected


names_text = st.text(min_size=0, max_size=90)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(names_text, names_text), max_size=25), st.booleans())
def test_property_portable_unique_deterministic(pairs, prefixed) -> None:
    names = publish_names(pairs, prefixed=prefixed)
    assert set(names) == set(pairs)
    assert all(PORTABLE.match(n) for n in names.values()), names
    assert len(set(names.values())) == len(names), "names must be unique"
    assert publish_names(list(reversed(pairs)), prefixed=prefixed) == names


@given(names_text)
def test_property_sanitize_part(text) -> None:
    part = sanitize_part(text)
    assert part and re.fullmatch(r"[A-Za-z0-9_-]+", part) and "__" not in part


def test_collisions_name_every_clash_before_any_hash() -> None:
    pairs = [("a", "echo"), ("b", "echo"), ("a", "odd.name"), ("b", "odd_name"), ("a", "search"), ("a", "pid")]
    clashes = collisions(pairs, prefixed=False, reserved=["search"])
    assert clashes == {"echo": [("a", "echo"), ("b", "echo")], "odd_name": [("a", "odd.name"), ("b", "odd_name")], "search": [("a", "search")]}
    assert collisions(pairs, prefixed=True) == {}
    message = describe_collisions(clashes, frozenset({"search"}))
    assert message == "tool names collide: echo (servers a, b); odd_name ('odd.name' of a, 'odd_name' of b); search (server a, and reserved by the host)"
