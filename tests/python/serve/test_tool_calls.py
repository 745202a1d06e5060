"""npugraph-serve's tool calls (issue 47 item 4; Note [Tool calls] in apps/serve/tools.hpp):
`tools` / `tool_choice` (auto, none, required, a named function) / `parallel_tool_calls` with
OpenAI's tool_calls shape, whole and streamed, through the `openai` client. On SmolLM2 (ChatML;
the Gemma 3 file fetched has no chat template), when fetched: every call's arguments are valid under the tool's
parameters (`jsonschema`, an independent validator); a round trip — the call, the tool's result
as a `tool` message, the answer; streamed deltas put together equal the whole answer. On the tiny
model: every bad value is a 400 naming the field.
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
from test_server import MODEL_ID, Server, error_of, post, write_tiny_model  # noqa: E402

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"]}
TIME = {"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 30}}, "required": ["timezone"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The current weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a time zone",
                                           "parameters": TIME}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
QUESTION = [{"role": "user", "content": "What is the weather like in Paris?"}]


def served(model):
    if not model.is_file():
        pytest.skip(f"model not fetched ({model}): run /usr/bin/python3 tools/fetch_model.py all")
    s = Server(model, "--max-batch", "4", "--threads", "2")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def smollm2():
    yield from served(default_model())


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve_tools") / "tiny.gguf"
    write_tiny_model(path)
    s = Server(path, "--max-batch", "4")
    yield s
    assert s.stop() == 0


def ask(server, messages=QUESTION, **kw):
    return server.client().chat.completions.create(model=MODEL_ID, messages=messages, tools=TOOLS,
                                                   max_tokens=kw.pop("max_tokens", 160),
                                                   temperature=kw.pop("temperature", 0), **kw)


def check_calls(calls, names=None):
    assert calls, "no tool calls"
    for c in calls:
        assert c.type == "function" and c.id.startswith("call_")
        assert names is None or c.function.name in names, c.function.name
        jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])
    assert len({c.id for c in calls}) == len(calls)


def streamed(stream):
    """(content, [(id, name, arguments)], finish_reason) put together from a stream's deltas."""
    content, calls, finish = "", {}, None
    for chunk in stream:
        for ch in chunk.choices:
            content += ch.delta.content or ""
            for d in ch.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = d.id or call["id"]
                call["name"] += d.function.name or ""
                call["arguments"] += d.function.arguments or ""
            finish = ch.finish_reason or finish
    return content, [(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())], finish


def as_tuples(message):
    return (message.content or "", [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []])


def test_required_named_and_single_calls_follow_the_parameters(smollm2):
    r = ask(smollm2, tool_choice="required", parallel_tool_calls=False).choices[0]
    assert r.finish_reason == "tool_calls" and r.message.content is None
    check_calls(r.message.tool_calls)
    assert len(r.message.tool_calls) == 1
    r = ask(smollm2, tool_choice={"type": "function", "function": {"name": "get_time"}}).choices[0]
    assert r.finish_reason == "tool_calls"
    check_calls(r.message.tool_calls, {"get_time"})
    assert len(r.message.tool_calls) == 1
    # Parallel calls: as many as the model makes (this one repeats them until max_tokens), each
    # complete one valid, and nothing but calls (a call cut short comes back as text).
    r = ask(smollm2, tool_choice="required", max_tokens=100).choices[0]
    check_calls(r.message.tool_calls)
    assert len(r.message.tool_calls) >= 2
    assert r.finish_reason == "tool_calls" or (r.finish_reason == "length" and
                                               (r.message.content or "").startswith("<tool_call>"))


def test_a_round_trip_call_result_answer(smollm2):
    first = ask(smollm2, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    call = first.choices[0].message.tool_calls[0]
    check_calls([call], {"get_weather"})
    messages = QUESTION + [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": call.id, "type": "function",
                         "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})}]
    answer = ask(smollm2, messages, tool_choice="none")
    a = answer.choices[0]
    assert a.finish_reason in ("stop", "length") and a.message.content and not a.message.tool_calls
    # The second prompt holds the question, the call and its result (tools left out: "none").
    alone = ask(smollm2, tool_choice="none", max_tokens=1)
    assert answer.usage.prompt_tokens > alone.usage.prompt_tokens + 20


def test_streamed_deltas_equal_the_whole_answer(smollm2):
    for kw in ({"tool_choice": "required"}, {"tool_choice": "auto"},
               {"tool_choice": {"type": "function", "function": {"name": "get_time"}}}):
        whole = ask(smollm2, **kw).choices[0]
        content, calls, finish = streamed(ask(smollm2, stream=True, **kw))
        w_content, w_calls = as_tuples(whole.message)
        # ids name the engine request: the same calls, each with its own request's id
        assert (content, [c[1:] for c in calls], finish) == (w_content, [c[1:] for c in w_calls],
                                                              whole.finish_reason), kw
        assert all(i.startswith("call_") for i, _, _ in calls)


def test_auto_may_answer_in_text_and_none_lists_no_tools(smollm2):
    r = ask(smollm2, tool_choice="auto").choices[0]
    assert r.finish_reason in ("stop", "tool_calls", "length")
    if r.message.tool_calls:
        check_calls(r.message.tool_calls)
    none = ask(smollm2, tool_choice="none")
    plain = smollm2.client().chat.completions.create(model=MODEL_ID, messages=QUESTION, max_tokens=160, temperature=0)
    assert none.choices[0].message.content == plain.choices[0].message.content  # the same prompt: no tools in it
    assert none.usage.prompt_tokens == plain.usage.prompt_tokens


def body(**kw):
    return {"model": MODEL_ID, "messages": QUESTION, **kw}


@pytest.mark.parametrize("fields, param, words", [
    ({"tools": {}}, "tools", "must be a non-empty array"),
    ({"tools": []}, "tools", "must be a non-empty array"),
    ({"tools": [{"type": "retrieval"}]}, "tools[0].type", "must be 'function'"),
    ({"tools": [{"type": "function"}]}, "tools[0].function", "is required"),
    ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name", "1 to 64 of"),
    ({"tools": [TOOLS[0], TOOLS[0]]}, "tools[1].function.name", "another tool has this name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]}, "tools[0].function.parameters",
     "must be a JSON Schema object"),
    ({"tools": [{"type": "function", "function": {"name": "f", "extra": 1}}]}, "tools[0].function.extra",
     "is not a field of a function"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", "'sometimes': must be 'none', 'auto', 'required'"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice.function.name",
     "no tool in 'tools' has this name"),
    ({"tool_choice": "auto"}, "tool_choice", "'tool_choice' needs 'tools'"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls", "must be a boolean"),
    ({"tools": TOOLS, "response_format": {"type": "json_object"}}, "response_format", "cannot be combined with 'tools'"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id", "is required with role 'tool'"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{nope"}}]}]},
     "messages[0].tool_calls[0].function.arguments", "is not valid JSON"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]},
     "messages[0].tool_calls[0].function.arguments", "must be a string"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "bogus"}}}]}, "tools",
     "cannot be compiled into a grammar"),
])
def test_bad_tool_fields_are_400s_naming_the_field(tiny_server, fields, param, words):
    r = post(tiny_server, "/v1/chat/completions", body(**fields))
    assert r.status_code == 400, r.text
    e = error_of(r)
    assert e["param"] == param and words in e["message"], e
