"""The agent loop against a scripted OpenAI-compatible server (skillaudit.agents.agent)."""

from __future__ import annotations

import json

import pytest
from _harness_fakes import ScriptedServer, chat_reply, native_call, text_reply, write_library

from skillaudit.agents.agent import (
    AgentConfig,
    AgentError,
    ChatClient,
    parse_text_tool_calls,
    run_episode,
)
from skillaudit.agents.retrieve import SkillIndex
from skillaudit.library import load_library
from skillaudit.tasks.benchmarks import Task

TASK = Task("Mbpp/2", "mbpp_plus", "Write a function to find the shared elements of two lists.",
            {"entry_point": "similar_elements"})
ANSWER = "```python\ndef similar_elements(a, b):\n    return tuple(set(a) & set(b))\n```"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return SkillIndex(load_library(write_library(tmp_path_factory.mktemp("lib"))))


def cfg(url: str, **kw) -> AgentConfig:
    base = {"endpoint": url, "model": "fake", "backoff_s": 0.01, "retries": 2}
    base.update(kw)
    return AgentConfig(**base)


def episode(server: ScriptedServer, index, enabled: bool = True, seed: int = 5, **kw):
    c = cfg(server.url, **kw)
    client = ChatClient(c)
    try:
        return run_episode(client, c, TASK, enabled, seed, index)
    finally:
        client.close()


def test_native_tool_call_retrieves_then_answers(index):
    """A native tool call is executed, its result sent back as a tool message, and the answer kept."""
    script = [chat_reply(None, [native_call("shared elements two lists")], "tool_calls"), chat_reply(ANSWER)]
    with ScriptedServer(script) as srv:
        ep = episode(srv, index, tool_mode="native")
    assert ep.invoked and ep.turns == 2 and ep.answer_text == ANSWER
    assert ep.retrievals[0].hits[0].id == "set-intersection"
    first, second = srv.requests
    assert first["tools"][0]["function"]["name"] == "search_skills"
    tool_msg = second["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_1"
    assert "## Skill: set-intersection" in tool_msg["content"]


def test_disabled_run_has_same_prompt_and_seed_without_the_tool(index):
    """Disabled: no tool definition, the same user prompt and seed, a system prompt without the tool part."""
    with ScriptedServer([chat_reply(ANSWER), chat_reply(ANSWER)]) as srv:
        on = episode(srv, index, enabled=True, tool_mode="native")
        off = episode(srv, index, enabled=False, tool_mode="native")
    req_on, req_off = srv.requests
    assert "tools" in req_on and "tools" not in req_off
    assert req_on["seed"] == req_off["seed"] == 5
    assert req_on["messages"][1] == req_off["messages"][1]
    assert req_on["messages"][0]["content"].startswith(req_off["messages"][0]["content"])
    assert "search_skills" not in req_off["messages"][0]["content"]
    assert not on.invoked and not off.invoked and on.answer_text == off.answer_text == ANSWER


def test_json_tool_call_written_in_text_is_accepted(index):
    """Text mode: a <tool_call> JSON in the message is executed and answered in a user turn."""
    call = '<tool_call>\n{"name": "search_skills", "arguments": {"query": "prime number"}}\n</tool_call>'
    with ScriptedServer([chat_reply(call), chat_reply(ANSWER)]) as srv:
        ep = episode(srv, index, tool_mode="text")
    assert ep.invoked and ep.retrievals[0].hits[0].id == "prime-test"
    assert srv.requests[0]["stop"] == ["</tool_call>"]
    assert "<tools>" in srv.requests[0]["messages"][0]["content"]
    follow = srv.requests[1]["messages"][-1]
    assert follow["role"] == "user" and "<tool_response>" in follow["content"]


def test_malformed_tool_call_is_logged_and_returns_nothing(index):
    """A <tool_call> that is not JSON counts as a call, returns no skills and is logged with an error."""
    with ScriptedServer([chat_reply("<tool_call>\nsearch for primes please\n</tool_call>"),
                         chat_reply(ANSWER)]) as srv:
        ep = episode(srv, index, tool_mode="text")
    assert ep.invoked and ep.malformed_calls == 1
    assert ep.retrievals[0].hits == [] and ep.retrievals[0].error == "malformed tool call"
    assert ep.answer_text == ANSWER


def test_invalid_arguments_return_nothing(index):
    """A call with a non-string query returns nothing; the error is in the retrieval record."""
    with ScriptedServer([chat_reply(None, [native_call({"query": 7})]), chat_reply(ANSWER)]) as srv:
        ep = episode(srv, index, tool_mode="native")
    rec = ep.retrievals[0].to_record()
    assert rec["skills"] == [] and rec["error"].startswith("invalid arguments")


def test_at_most_max_calls_searches(index):
    """A model that keeps calling gets at most max_calls searches; later calls are refused."""
    calls = [chat_reply(None, [native_call(f"prime {i}", f"c{i}")]) for i in range(5)]
    with ScriptedServer([*calls, chat_reply(ANSWER)]) as srv:
        ep = episode(srv, index, tool_mode="native", max_calls=3)
    assert len(ep.retrievals) == 3 and ep.refused_calls >= 1
    assert ep.turns <= 3 + 2


def test_http_500_is_retried_then_succeeds(index):
    """Transient 500s are retried with backoff and the episode completes."""
    with ScriptedServer([(500, {"error": "boom"}), (503, {"error": "busy"}), chat_reply(ANSWER)]) as srv:
        ep = episode(srv, index, enabled=False, retries=3)
    assert ep.answer_text == ANSWER and len(srv.requests) == 3


def test_persistent_500_raises_agent_error(index):
    """When every retry fails the episode raises AgentError naming the last status."""
    with ScriptedServer([(500, {"error": "boom"})] * 5) as srv, pytest.raises(AgentError, match="HTTP 500"):
        episode(srv, index, enabled=False, retries=2)
    assert len(srv.requests) == 3


def test_client_errors_are_not_retried(index):
    """A 400 is a hard failure at once (retrying would not help)."""
    with ScriptedServer([(400, {"error": "bad model"})] * 3) as srv, pytest.raises(AgentError, match="HTTP 400"):
        episode(srv, index, enabled=False)
    assert len(srv.requests) == 1


def test_malformed_response_body_is_an_agent_error(index):
    """A 200 without choices is reported, not crashed on."""
    with ScriptedServer([(200, {"nothing": True})]) as srv, pytest.raises(AgentError, match="malformed"):
        episode(srv, index, enabled=False)


def test_api_key_is_sent_as_bearer_header(index):
    """The key goes in the Authorization header only (never in the body)."""
    with ScriptedServer([chat_reply(ANSWER)]) as srv:
        episode(srv, index, enabled=False, api_key="sk-secret-123")
    assert srv.headers[0]["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret-123" not in json.dumps(srv.requests)
    assert "sk-secret" not in json.dumps(cfg(srv.url, api_key="sk-secret-123").public())


def test_chatml_required_call_prefills_the_query_and_withdraws_the_tool(index):
    """chatml + required: the model writes only the query; the answer turn sees the skills and no tool."""
    with ScriptedServer([text_reply("shared elements two lists"), text_reply("def similar_elements(a, b):\n"
                                                                            "    return tuple(set(a) & set(b))\n")]) as srv:
        ep = episode(srv, index, tool_mode="chatml", tool_choice="required", max_calls=1)
    first, second = srv.requests
    assert first["path"].endswith("/completions") and "chat" not in first["path"]
    assert first["prompt"].endswith('{"name": "search_skills", "arguments": {"query": "')
    assert '"' in first["stop"]
    assert "<tools>" not in second["prompt"] and "## Skill: set-intersection" in second["prompt"]
    assert second["prompt"].endswith("<|im_start|>assistant\n```python\n")
    assert ep.retrievals[0].query == "shared elements two lists"
    assert ep.answer_text.startswith("```python\ndef similar_elements")


def test_parse_text_tool_calls_variants():
    """Tagged JSON, llama.cpp's `functions.NAME:` form, bare JSON and a cut-off call are all understood."""
    tagged = parse_text_tool_calls('<tool_call>{"name": "search_skills", "arguments": {"query": "a"}}</tool_call>')
    funcs = parse_text_tool_calls('functions.search_skills:\n{"query": "b"}')
    bare = parse_text_tool_calls('{"name": "search_skills", "arguments": "{\\"query\\": \\"c\\"}"}')
    cut = parse_text_tool_calls('<tool_call>{"name": "search_skills", "arguments": {"query": "d"}')
    assert tagged[0].arguments == {"query": "a"}
    assert funcs[0].name == "search_skills" and funcs[0].arguments == {"query": "b"}
    assert bare[0].arguments == {"query": "c"}
    assert cut[0].arguments == {"query": "d"}
    assert parse_text_tool_calls("```python\ndef f(): pass\n```") == []
