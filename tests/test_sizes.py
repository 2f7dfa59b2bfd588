"""What a cached value is counted as (``rewardkit.files.sizes``): a decoded answer's bound is never below its walk."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.files.sizes import JSON_BYTES_PER_CHAR, approx_size, decoded_json_size

# The costliest JSON shapes per character of text: each object made from the fewest characters.
CJK_KEYS = ",".join(f'"{chr(0x20000 + i)}":{{}}' for i in range(2000))  # one-character astral keys: new strings
JSON_SHAPES = {
    "lists in lists": "[" * 900 + "]" * 900,  # 88 bytes a one-item list, two brackets: 44 a character
    "dicts in dicts": "".join(f'{{"{chr(0x20000 + i)}":' for i in range(900)) + "0" + "}" * 900,  # 264 / 6 = 44
    "empty lists": "[" + ",".join(["[]"] * 5000) + "]",
    "empty dicts": "[" + ",".join(["{}"] * 5000) + "]",
    "one-key dicts": "[" + ",".join(['{"a":0}'] * 5000) + "]",
    "one-character strings": "[" + ",".join(['"中"'] * 5000) + "]",
    "astral keys": "{" + CJK_KEYS + "}",
    "floats": "[" + ",".join(["1e5"] * 5000) + "]",
    "empty": "{}",
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=4),
    max_leaves=30,
)


class TestDecodedJsonBound:
    """A parse's decoded answer is counted by ``decoded_json_size`` (no walk): never less than the walk finds."""

    @pytest.mark.parametrize("text", JSON_SHAPES.values(), ids=JSON_SHAPES.keys())
    def test_the_costliest_shapes(self, text: str) -> None:
        walked = approx_size(json.loads(text))
        assert walked <= decoded_json_size(text)
        assert walked / len(text) <= JSON_BYTES_PER_CHAR - 4  # 44 bytes a character at most: room left

    @settings(max_examples=300, deadline=None)
    @given(json_values)
    def test_any_json_value(self, value: Any) -> None:
        for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, separators=(",", ":"))):
            assert approx_size(json.loads(text)) <= decoded_json_size(text)
