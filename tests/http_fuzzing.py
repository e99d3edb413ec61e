"""What the HTTP fuzz tests share: JSON values of every kind and awkward string, and what every answer must be."""

from __future__ import annotations

from typing import Any

import httpx
from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    | st.sampled_from(["\ud800", "<|im_end|>", "<|fim_prefix|>", "\x00", "é" * 3]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def check_answer(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        assert response.text.rstrip().endswith("data: [DONE]") or '"error"' in response.text, response.text
        return
    body: Any = response.json()
    if response.status_code >= 400:
        assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
        assert "Traceback" not in body["error"]["message"]
