"""npugraph-serve's structured output (issue 47 item 3; Note [Structured output] in
apps/serve/grammar.hpp): response_format json_schema and json_object through the `openai` client.
On SmolLM2 (fetched by make setup): 20 schemas — nested objects, arrays, enums, numbers, required
fields, patterns, unions — each answer parsed with `json` and validated against its schema by
`jsonschema` (an independent validator), greedy and sampled, whole and streamed, chat and
completions, n > 1. On the tiny model: every bad response_format is a 400 naming the field.
"""
import json
import pathlib
import sys

import pytest

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("gguf")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "examples" / "llm"))
from decode import default_model  # noqa: E402 - the example's model lookup (tools/fetch_model.py's)
from test_server import MODEL_ID, Server, error_of, post, stream_text, write_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve_structured") / "tiny.gguf"
    write_tiny_model(path)
    s = Server(path, "--max-batch", "4")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def smollm2():
    model = default_model()
    if not model.is_file():
        pytest.skip(f"model not fetched ({model}): run /usr/bin/python3 tools/fetch_model.py")
    s = Server(model, "--max-batch", "4", "--threads", "2")
    yield s
    assert s.stop() == 0


def schema_format(schema, name="answer"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 130}},
          "required": ["name", "age"]}

# (prompt, schema): what a client asks for, each bounded (maxItems, maxLength, enums, ranges) so
# that a 135M model's greedy answer ends within max_tokens.
SCHEMAS = [
    ("Describe a person as JSON.", PERSON),
    ("Give a city and its country as JSON.",
     {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                       "country": {"type": "string", "maxLength": 30}},
      "required": ["city", "country"]}),
    ("Is the sky blue? Answer as JSON.",
     {"type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"]}),
    ("Pick a primary colour as JSON.",
     {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}}, "required": ["colour"]}),
    ("List three fruits as JSON.",
     {"type": "object", "properties": {"fruits": {"type": "array", "items": {"type": "string", "maxLength": 20},
                                                  "minItems": 3, "maxItems": 3}},
      "required": ["fruits"]}),
    ("Give the temperature of a warm day in Celsius as JSON.",
     {"type": "object", "properties": {"celsius": {"type": "number", "minimum": -50, "maximum": 60}},
      "required": ["celsius"]}),
    ("Describe a book with its title, author and year as JSON.",
     {"type": "object", "properties": {"title": {"type": "string", "maxLength": 60},
                                       "author": {"type": "string", "maxLength": 40},
                                       "year": {"type": "integer", "minimum": 1000, "maximum": 2100}},
      "required": ["title", "author", "year"]}),
    ("Describe a company and its address as JSON.",
     {"type": "object", "properties": {
         "name": {"type": "string", "maxLength": 40},
         "address": {"type": "object", "properties": {"street": {"type": "string", "maxLength": 40},
                                                      "city": {"type": "string", "maxLength": 30},
                                                      "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                     "required": ["street", "city", "zip"]}},
      "required": ["name", "address"]}),
    ("Give two people with names and ages as JSON.",
     {"type": "object", "properties": {"people": {"type": "array", "items": PERSON, "minItems": 2, "maxItems": 2}},
      "required": ["people"]}),
    ("Rate a movie from 1 to 5 as JSON.",
     {"type": "object", "properties": {"movie": {"type": "string", "maxLength": 40},
                                       "stars": {"type": "integer", "enum": [1, 2, 3, 4, 5]}},
      "required": ["movie", "stars"]}),
    ("Give a point on a plane as JSON.",
     {"type": "object", "properties": {"x": {"type": "number", "minimum": -100, "maximum": 100},
                                       "y": {"type": "number", "minimum": -100, "maximum": 100}},
      "required": ["x", "y"]}),
    ("Classify the sentence 'I love this' as JSON.",
     {"type": "object", "properties": {"sentiment": {"enum": ["positive", "negative", "neutral"]},
                                       "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
      "required": ["sentiment", "confidence"]}),
    ("Give a list of up to four small integers as JSON.",
     {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 1, "maxItems": 4}),
    ("Describe a user account as JSON.",
     {"type": "object", "properties": {"username": {"type": "string", "pattern": "^[a-z]{3,12}$"},
                                       "active": {"type": "boolean"},
                                       "roles": {"type": "array", "items": {"enum": ["admin", "user", "guest"]},
                                                 "maxItems": 3}},
      "required": ["username", "active", "roles"]}),
    ("Give an optional nickname for Robert as JSON.",
     {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                       "nickname": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]}},
      "required": ["name", "nickname"]}),
    ("Describe the weather as JSON.",
     {"type": "object", "properties": {"condition": {"enum": ["sunny", "cloudy", "rainy", "snowy"]},
                                       "wind": {"type": "object",
                                                "properties": {"speed": {"type": "integer", "minimum": 0,
                                                                         "maximum": 200},
                                                               "direction": {"enum": ["N", "E", "S", "W"]}},
                                                "required": ["speed", "direction"]}},
      "required": ["condition", "wind"]}),
    ("Give a shopping list with quantities as JSON.",
     {"type": "object", "properties": {"items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
         "type": "object", "properties": {"item": {"type": "string", "maxLength": 20},
                                          "quantity": {"type": "integer", "minimum": 1, "maximum": 12}},
         "required": ["item", "quantity"]}}},
      "required": ["items"]}),
    ("Translate 'hello' into French and Spanish as JSON.",
     {"type": "object", "properties": {"translations": {"type": "object", "properties": {
         "french": {"type": "string", "maxLength": 20}, "spanish": {"type": "string", "maxLength": 20}},
         "required": ["french", "spanish"]}},
      "required": ["translations"]}),
    ("Give a date as JSON.",
     {"type": "object", "properties": {"year": {"type": "integer", "minimum": 1900, "maximum": 2100},
                                       "month": {"type": "integer", "minimum": 1, "maximum": 12},
                                       "day": {"type": "integer", "minimum": 1, "maximum": 31}},
      "required": ["year", "month", "day"]}),
    ("Give an HTTP status code and its meaning as JSON.",
     {"type": "object", "properties": {"code": {"type": "integer", "minimum": 100, "maximum": 599},
                                       "meaning": {"type": "string", "maxLength": 40},
                                       "error": {"type": "boolean"}},
      "required": ["code", "meaning", "error"]}),
]
assert len(SCHEMAS) == 20


def ask(server, prompt, schema, **kw):
    return server.client().chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": prompt}], max_tokens=kw.pop("max_tokens", 256),
        temperature=kw.pop("temperature", 0), response_format=schema_format(schema), **kw)


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_every_answer_is_valid_under_its_schema(smollm2, i):
    prompt, schema = SCHEMAS[i]
    r = ask(smollm2, prompt, schema)
    c = r.choices[0]
    assert c.finish_reason == "stop", c.message.content  # the JSON ended, not max_tokens
    jsonschema.validate(json.loads(c.message.content), schema)


def test_streamed_equals_whole_and_sampled_choices_are_valid(smollm2):
    prompt, schema = SCHEMAS[7]  # the nested company
    whole = ask(smollm2, prompt, schema).choices[0].message.content
    text, finish = stream_text(ask(smollm2, prompt, schema, stream=True))
    assert (text, finish) == (whole, "stop")
    r = ask(smollm2, prompt, schema, temperature=1.0, seed=7, n=3)
    assert len(r.choices) == 3
    for c in r.choices:
        assert c.finish_reason == "stop", c.message.content
        jsonschema.validate(json.loads(c.message.content), schema)


def test_json_object_and_the_completions_endpoint(smollm2):
    r = smollm2.client().chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": "What is the capital of France? Answer as JSON."}],
        max_tokens=256, temperature=0, response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    r = post(smollm2, "/v1/completions", {"model": MODEL_ID, "prompt": "A person as JSON:", "max_tokens": 128,
                                          "temperature": 0, "response_format": schema_format(PERSON)})
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    assert c["finish_reason"] == "stop", c
    jsonschema.validate(json.loads(c["text"]), PERSON)


def test_properties_come_in_the_schemas_order(smollm2):
    schema = {"type": "object", "properties": {"zeta": {"type": "integer", "minimum": 0, "maximum": 9},
                                               "alpha": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["zeta", "alpha"]}
    text = ask(smollm2, "Two digits as JSON.", schema).choices[0].message.content
    assert list(json.loads(text)) == ["zeta", "alpha"], text


def body(fmt):
    return {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "response_format": fmt}


@pytest.mark.parametrize("fmt, param, words", [
    ("json", "response_format", "must be an object"),
    ({"type": "xml"}, "response_format.type", "'xml': must be 'text', 'json_object' or 'json_schema'"),
    ({}, "response_format.type", "must be 'text', 'json_object' or 'json_schema'"),
    ({"type": "json_schema"}, "response_format.json_schema", "is required with type 'json_schema'"),
    ({"type": "json_object", "json_schema": {}}, "response_format.json_schema", "goes with type 'json_schema' only"),
    ({"type": "json_schema", "json_schema": {"schema": {}}}, "response_format.json_schema.name", "is required"),
    ({"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}, "response_format.json_schema.name",
     "must be 1 to 64 of"),
    ({"type": "json_schema", "json_schema": {"name": "x" * 65}}, "response_format.json_schema.name",
     "must be 1 to 64 of"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": [1]}}, "response_format.json_schema.schema",
     "must be a JSON Schema (an object)"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {}, "strict": "yes"}},
     "response_format.json_schema.strict", "must be a boolean"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {}, "extra": 1}},
     "response_format.json_schema.extra", "is not a field of json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "a"}, "other": 1}, "response_format.other",
     "is not a field of response_format"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "bogus"}}},
     "response_format.json_schema.schema", "cannot be compiled into a grammar: Unsupported type \"bogus\""),
])
def test_bad_response_formats_are_400s_naming_the_field(tiny_server, fmt, param, words):
    r = post(tiny_server, "/v1/chat/completions", body(fmt))
    assert r.status_code == 400, r.text
    e = error_of(r)
    assert e["param"] == param and words in e["message"], e


def test_text_format_and_a_grammar_on_the_tiny_model(tiny_server):
    r = post(tiny_server, "/v1/chat/completions", {**body({"type": "text"}), "max_tokens": 4})
    assert r.status_code == 200, r.text
    # An enum of one value: whatever the random model prefers, the answer is that value and ends.
    schema = {"enum": ["yes"]}
    r = post(tiny_server, "/v1/chat/completions", {**body(schema_format(schema)), "max_tokens": 32})
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    assert (json.loads(c["message"]["content"]), c["finish_reason"]) == ("yes", "stop"), c
    m = tiny_server.metrics()
    assert m.get("npugraph_kv_blocks_used", 0) == 0


def test_concurrent_first_requests_share_one_compiler(tmp_path):
    # The grammar compiler is built by whichever request asks first (std::call_once); eight clients
    # at once on a fresh server, half of them with the same schema, all get their grammar.
    import concurrent.futures
    path = tmp_path / "tiny.gguf"
    write_tiny_model(path)
    s = Server(path, "--max-batch", "4")
    try:
        def one(i):
            schema = {"enum": ["yes"]} if i % 2 else {"enum": [f"v{i}"]}
            r = post(s, "/v1/chat/completions", {**body(schema_format(schema)), "max_tokens": 32})
            return i, r.status_code, r.json()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for i, status, j in pool.map(one, range(8)):
                assert status == 200, j
                assert json.loads(j["choices"][0]["message"]["content"]) == ("yes" if i % 2 else f"v{i}"), j
    finally:
        assert s.stop() == 0
