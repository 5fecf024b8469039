"""The JSON text of messages and schemas is exactly ``json.dumps``'s, remembered or not.

And the cache key built from it is the documented sha256 of the canonical document.
"""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from governed_broker.llm import LLMRequest, cache_key
from governed_broker.llm.cache import KEY_VERSION, canonical_json
from governed_broker.llm.jsontext import OPTIONS, messages_json, schema_json

TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=60)
LONG = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=200)
ROLE = st.sampled_from(["system", "user", "assistant"])
MESSAGE = st.one_of(  # chat messages in either key order, and other mappings
    st.fixed_dictionaries({"role": ROLE, "content": LONG}),
    st.fixed_dictionaries({"content": LONG, "role": ROLE}),
    st.fixed_dictionaries({"role": ROLE, "content": LONG, "name": TEXT}),
    st.fixed_dictionaries({"role": ROLE, "content": st.integers()}))
SCHEMA = st.recursive(st.none() | st.booleans() | st.integers() | TEXT,
                      lambda inner: st.dictionaries(TEXT, inner, max_size=4), max_leaves=8)


@given(st.lists(MESSAGE, max_size=4), st.sampled_from(list(OPTIONS)))
def test_messages_are_encoded_as_json_dumps_would(messages, form) -> None:
    for _ in range(2):  # the second time long strings come from memory
        assert messages_json(messages, form) == json.dumps([dict(m) for m in messages],
                                                          **OPTIONS[form])


ASCII_LONG = st.text(alphabet=st.characters(max_codepoint=0x80), min_size=64, max_size=200)


@given(st.lists(st.fixed_dictionaries({"role": ROLE, "content": ASCII_LONG | LONG}),
                min_size=1, max_size=3),
       st.permutations(list(OPTIONS)))
def test_one_message_encoded_in_every_form_in_turn_is_each_forms_json(messages, forms) -> None:
    # an ASCII text's encoding is shared by the forms (DEL and beyond are escaped apart)
    for form in forms:
        assert messages_json(messages, form) == json.dumps([dict(m) for m in messages],
                                                          **OPTIONS[form])


@given(st.dictionaries(TEXT, SCHEMA, max_size=4), st.sampled_from(list(OPTIONS)))
def test_schemas_are_encoded_as_json_dumps_would(schema, form) -> None:
    for _ in range(2):
        assert schema_json(schema, form) == json.dumps(schema, **OPTIONS[form])
    assert schema_json(None, form) == "null"


@given(st.lists(MESSAGE, min_size=1, max_size=3), st.dictionaries(TEXT, SCHEMA, max_size=3),
       st.integers(0, 2**63 - 1), st.floats(0, 2), st.integers(1, 4096), TEXT, TEXT)
def test_the_cache_key_is_the_sha256_of_the_canonical_document(messages, schema, seed,
                                                               temperature, tokens, kind,
                                                               model) -> None:
    request = LLMRequest.of(messages, json_schema=schema or None, seed=seed,
                            temperature=temperature, max_tokens=tokens, num_ctx=2 * tokens)
    document = {"v": KEY_VERSION, "backend": kind, "model": model,
                "messages": [dict(m) for m in messages], "schema": request.json_schema,
                "options": {"temperature": temperature, "seed": seed, "max_tokens": tokens,
                            "num_ctx": 2 * tokens}}
    expected = hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()
    assert cache_key(kind, model, request) == expected
