"""The agent loop: one task, one condition, against an OpenAI-compatible endpoint.

Enabled: the `search_skills` tool is offered; disabled: the same prompt and seed with the tool
definition removed. Three ways to offer the tool (`--tool-mode`):

- `native`: the `tools` request field of /chat/completions; replies with `tool_calls`;
- `text`: the tool definition is written into the system prompt in the Hermes/Qwen format and the
  model writes `<tool_call>{"name": ..., "arguments": ...}</tool_call>` in its message;
- `chatml`: raw ChatML prompts over /v1/completions, for local servers whose chat template gets in
  the way (llama-cpp-python's `chatml-function-calling` HTML-escapes every message and drops `tool`
  messages). Tool results are added to the user turn, and once no search is left the tool
  definition is withdrawn, so the answer turn differs from the disabled run only by the skills.

`--tool-choice required` makes the first enabled turn a call (OpenAI `tool_choice`; in chatml mode
a prefilled `<tool_call>` whose query the model writes). Either way a JSON tool call written in the
message text is accepted. Transient HTTP failures (429, 5xx, connection errors, timeouts) are
retried with exponential backoff; what still fails raises `AgentError`, which the runner logs as an
error record. The API key is sent in the Authorization header, never logged.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skillaudit.agents.retrieve import MAX_CALLS, TOP_K, Retrieval, SkillIndex, render_result
from skillaudit.errors import HarnessError, require

TOOL_NAME = "search_skills"
TOOL_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Search the skill library: procedural guides (when to apply, steps, snippets, "
            "invariants, self-tests). BM25 over skill descriptions and bodies; returns the top 3 "
            "skills in full."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "the technique or problem type you need"},
                "types": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": 'optional domains to search, e.g. ["coding"] or ["math"]',
                },
            },
            "required": ["query"],
        },
    },
}

SYSTEM_CODE = (
    "You are an expert Python programmer. Your final answer must be one complete, self-contained "
    "Python function with exactly the function name and arguments of the test, in a single "
    "```python code block (include any imports it needs), with no explanation."
)
SYSTEM_MATH = (
    "You are a careful math solver. Reason step by step in a few short lines, then give the "
    "final answer as \\boxed{ANSWER} with only the number or expression inside."
)
TOOL_INTRO = (
    "You can consult a library of skills: short, tested guides written by experienced engineers "
    "and teachers. Start by calling search_skills with a short query naming the technique or "
    "problem type (for example \"count element frequency\" or \"percentage discount\"), then "
    "use what helps. You may search up to {max_calls} times; then write your answer."
)
TEXT_TOOLS = (
    "\n\n# Tools\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n{tools}\n</tools>\n\nFor each function call, return a json object with function name "
    "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
STOP_TEXT = ["</tool_call>"]
LIMIT_REACHED = "Search limit reached: no more skills can be returned. Write your final answer now."
FINAL_NUDGE = "That was your last search. Now write your final answer to the task."
AGAIN_NUDGE = "Use what helps. Search again only if you need to; otherwise write your final answer."


class AgentError(HarnessError):
    """A chat request failed for good (after retries) or returned something unusable."""


@dataclass
class AgentConfig:
    """Endpoint and sampling settings shared by every task (the API key is never logged)."""

    endpoint: str
    model: str
    api_key: str | None = None
    temperature: float = 0.7
    max_tokens: int = 512
    tool_mode: str = "text"  # "text" | "native"
    tool_choice: str = "auto"  # "auto" | "required" (the first enabled turn must call the tool)
    unescape_html: bool = False  # undo servers whose chat template HTML-escapes messages
    max_calls: int = MAX_CALLS
    top_k: int = TOP_K
    request_timeout_s: float = 600.0
    retries: int = 4
    backoff_s: float = 2.0
    top_p: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """Settings that go into each record's `meta` (no endpoint secrets, no key)."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens,
                "tool_call_mode": self.tool_mode, "tool_choice": self.tool_choice,
                "max_calls": self.max_calls, "unescape_html": self.unescape_html, "top_k": self.top_k}


@dataclass
class Episode:
    """What one agent run produced."""

    answer_text: str
    retrievals: list[Retrieval] = field(default_factory=list)
    invoked: bool = False
    turns: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    finish_reason: str | None = None
    latency_s: float = 0.0
    refused_calls: int = 0
    malformed_calls: int = 0
    #: the model's tool-call turns, verbatim, with the parsed calls: what an arm replays (`meta.replay`)
    call_turns: list[dict[str, Any]] = field(default_factory=list)
    replayed: int = 0  # turns taken from a replay instead of the model


class ChatClient:
    """POST /chat/completions with retries and exponential backoff on transient failures."""

    def __init__(self, cfg: AgentConfig) -> None:
        httpx = require("httpx", "harness")
        self.cfg = cfg
        self._httpx = httpx
        headers = {"Content-Type": "application/json"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        self._client = httpx.Client(base_url=cfg.endpoint.rstrip("/") + "/", headers=headers,
                                    timeout=httpx.Timeout(cfg.request_timeout_s, connect=10.0))

    def close(self) -> None:
        self._client.close()

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.post("chat/completions", body)

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.post("completions", body)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        httpx = self._httpx
        attempt = 0
        while True:
            transient = None
            try:
                resp = self._client.post(path, content=json.dumps(body))
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                transient = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 429 or resp.status_code >= 500:
                    transient = f"HTTP {resp.status_code}: {resp.text[:200]}"
                elif resp.status_code >= 400:
                    raise AgentError(f"HTTP {resp.status_code} from the endpoint: {resp.text[:300]}")
                else:
                    try:
                        data = resp.json()
                        choice = data["choices"][0]
                        if "message" not in choice and "text" not in choice:
                            raise KeyError("message")
                    except (ValueError, KeyError, IndexError, TypeError):
                        raise AgentError(f"malformed response from the endpoint: {resp.text[:300]}") from None
                    return data
            attempt += 1
            if attempt > self.cfg.retries:
                raise AgentError(f"endpoint failed after {self.cfg.retries} retries: {transient}")
            delay = self.cfg.backoff_s * (2 ** (attempt - 1))
            retry_after = None
            if transient.startswith("HTTP 429"):
                try:
                    retry_after = float(resp.headers.get("retry-after", ""))
                except ValueError:
                    retry_after = None
            time.sleep(min(retry_after if retry_after is not None else delay * (0.75 + random.random() / 2), 120))


# ---- tool calls written in text -----------------------------------------------------------------
_TAG_RE = re.compile(r"<tool_call>\s*+(.*?)\s*(?:</tool_call>|\Z)", re.S)
_FUNCS_RE = re.compile(r"functions\.(\w+):\s*+")
#: what is parsed of a reply for tool calls (characters) and how many calls or JSON objects at
#: most: a call is a short object near the start, so a hostile reply costs a bounded scan
MAX_TOOL_TEXT = 256_000
MAX_TOOL_CALLS = 32


@dataclass
class ToolCall:
    """A parsed call: name and arguments (None if they were not valid JSON), plus its raw text."""

    name: str | None
    arguments: Any
    raw: str
    id: str | None = None


def _json_objects(text: str, limit: int = MAX_TOOL_CALLS) -> list[Any]:
    """Top-level JSON objects found in text, in order: at most `limit` of them, after at most
    `limit` failed starts (each a scan of the rest), so the cost is bounded by `limit` scans. A
    document too deep to decode is not JSON."""
    dec = json.JSONDecoder()
    out, i, failed = [], 0, 0
    while len(out) < limit and failed < limit:
        i = text.find("{", i)
        if i < 0:
            return out
        try:
            obj, end = dec.raw_decode(text, i)
        except (ValueError, RecursionError):
            failed += 1
            i += 1
            continue
        out.append(obj)
        i = end
    return out


def _loads(text: str) -> Any:
    """`json.loads`, with a document too deep to decode as not JSON (ValueError)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _call_from_obj(obj: Any, raw: str) -> ToolCall | None:
    if not isinstance(obj, dict):
        return None
    if "function" in obj and isinstance(obj["function"], dict):
        obj = obj["function"]
    name = obj.get("name") or obj.get("tool") or obj.get("tool_name")
    if name is None:
        return None
    args = obj.get("arguments", obj.get("parameters", obj.get("args")))
    if isinstance(args, str):
        try:
            args = _loads(args)
        except ValueError:
            args = None
    return ToolCall(str(name), args, raw)


def parse_text_tool_calls(text: str) -> list[ToolCall]:
    """Tool calls written in a message: `<tool_call>{json}</tool_call>`, `functions.NAME: {json}`,
    or a bare JSON object naming `search_skills`. A `<tool_call>` that is not JSON is returned
    with `name=None` (a malformed call)."""
    calls: list[ToolCall] = []
    text = text[:MAX_TOOL_TEXT]
    if "<tool_call>" in text:
        for n, m in enumerate(_TAG_RE.finditer(text)):
            if n >= MAX_TOOL_CALLS:
                break
            body = m.group(1)
            objs = _json_objects(body)
            start = body.find("{")
            if start >= 0 and (not objs or _call_from_obj(objs[0], body) is None):
                # a call cut short by one or two closing braces is repaired
                for tail in ("", "}", "}}", '"}}'):
                    try:
                        objs = [_loads(body[start:].rstrip() + tail)]
                        break
                    except ValueError:
                        continue
            call = _call_from_obj(objs[0], body) if objs else None
            calls.append(call or ToolCall(None, None, body))
        return calls
    dec = json.JSONDecoder()
    for n, m in enumerate(_FUNCS_RE.finditer(text)):
        if n >= MAX_TOOL_CALLS:
            break
        name, args, body = m.group(1), None, ""
        if text.startswith("{", m.end()):
            try:
                args, end = dec.raw_decode(text, m.end())
                body = text[m.end():end]
            except (ValueError, RecursionError):
                args = None
        calls.append(ToolCall(name, args, f"functions.{name}: {body}"))
    if calls:
        return calls
    stripped = text.strip()
    if TOOL_NAME in stripped and "```" not in stripped:
        for obj in _json_objects(stripped):
            call = _call_from_obj(obj, stripped)
            if call is not None and call.name == TOOL_NAME:
                calls.append(call)
    return calls


def strip_tool_calls(text: str) -> str:
    return _TAG_RE.sub("", text).strip()


# ---- the loop -----------------------------------------------------------------------------------
def tool_spec(types: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """The tool definition; `types` (the library's skill domains) become the allowed values."""
    spec = json.loads(json.dumps(TOOL_SPEC))
    props = spec["function"]["parameters"]["properties"]
    if types:
        props["types"]["items"]["enum"] = sorted(types)
        props["types"]["description"] = "optional: only skills of these domains"
    else:
        del props["types"]
    return spec


def system_prompt(benchmark_is_code: bool, enabled: bool, cfg: AgentConfig,
                  spec: dict[str, Any] | None = None) -> str:
    """The system prompt; the enabled one adds the tool paragraph (and, in text mode, its spec)."""
    base = SYSTEM_CODE if benchmark_is_code else SYSTEM_MATH
    if not enabled:
        return base
    text = base + "\n\n" + TOOL_INTRO.format(max_calls=cfg.max_calls)
    if cfg.tool_mode in ("text", "chatml"):
        text += TEXT_TOOLS.format(tools=json.dumps(spec or TOOL_SPEC, ensure_ascii=False))
    return text


CHATML_STOP = ["<|im_end|>", "<|endoftext|>", "</tool_call>"]
FORCED_PREFILL = '<tool_call>\n{"name": "search_skills", "arguments": {"query": "'
# chatml mode: once the tool can no longer be called (disabled run, or calls used up), the answer turn
# starts the same way in both conditions
ANSWER_PREFILL = {"code": "```python\n", "math": ""}


def render_chatml(messages: list[dict[str, Any]]) -> str:
    """Messages in ChatML (the Qwen template), ending with an open assistant turn."""
    parts = [f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n"


#: a tool's answer to one call: (query, types, skills already shown) -> (logged call, result text)
Tool = Callable[[Any, Any, set[str]], tuple[Retrieval, str]]


def _execute(index: SkillIndex | None, call: ToolCall, shown: set[str], tool: Tool | None = None,
             top_k: int = TOP_K) -> tuple[Retrieval, str]:
    if call.name != TOOL_NAME:
        ret = Retrieval(query=None, error=f"unknown tool {call.name!r}" if call.name else "malformed tool call")
        return ret, "No skills returned (unknown tool or malformed call)."
    args = call.arguments
    if not isinstance(args, dict):
        ret = Retrieval(query=None, error="invalid arguments: expected a JSON object")
        return ret, "No skills returned (invalid arguments)."
    if tool is not None:
        return tool(args.get("query"), args.get("types"), shown)
    if index is None:
        return Retrieval(query=None, error="no skill library"), "No skills returned."
    ret = index.search(args.get("query"), args.get("types"), k=top_k)
    return ret, render_result(index, ret, shown)


def _model_turn(client: ChatClient, cfg: AgentConfig, task, messages: list[dict[str, Any]], spec: dict[str, Any],
                seed: int, enabled: bool, ep: Episode, calls: int) -> tuple[str, list[Any], list[ToolCall]]:
    """Ask the model for its next turn: (content, native tool calls, the calls found in either)."""
    body: dict[str, Any] = {
        "model": cfg.model, "messages": messages, "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens, "seed": seed, **cfg.extra_body,
    }
    if cfg.top_p is not None:
        body["top_p"] = cfg.top_p
    force = enabled and ep.turns == 0 and cfg.tool_choice == "required"
    prefill = ""
    if cfg.tool_mode == "chatml":
        # raw ChatML over /v1/completions: no server chat template in the way; a forced call is
        # a prefilled `<tool_call>` whose query the model writes
        if force:
            prefill = FORCED_PREFILL
        elif not enabled or calls >= cfg.max_calls:
            prefill = ANSWER_PREFILL["code" if task.is_code else "math"]
        body.pop("messages")
        shown_msgs = messages
        if enabled and calls >= cfg.max_calls:
            # no searches left: the tool definition is withdrawn, so the answer turn differs
            # from the disabled run only by the skills it retrieved
            shown_msgs = [{"role": "system", "content": system_prompt(task.is_code, False, cfg)},
                          *messages[1:]]
        body["prompt"] = render_chatml(shown_msgs) + prefill
        # a forced call ends at the query's closing quote: the model writes the query only
        body["stop"] = [*CHATML_STOP, '"'] if force else CHATML_STOP
        if prefill == ANSWER_PREFILL["code"]:
            body["stop"] = [*CHATML_STOP, "\n```"]  # the code block is the answer
        data = client.complete(body)
    else:
        if cfg.tool_mode == "text":
            body["stop"] = STOP_TEXT
        elif enabled and calls < cfg.max_calls:
            body["tools"] = [spec]
            body["tool_choice"] = "auto"
        if force:
            # OpenAI-style forced call: the model must call search_skills and writes the query
            body["tools"] = [spec]
            body["tool_choice"] = {"type": "function", "function": {"name": TOOL_NAME}}
        data = client.chat(body)
    ep.turns += 1
    usage = data.get("usage") or {}
    for k in ("prompt_tokens", "completion_tokens"):
        if isinstance(usage.get(k), int):
            ep.usage[k] += usage[k]
    choice = data["choices"][0]
    msg = choice.get("message") or {}
    content = msg.get("content") or ""
    if cfg.tool_mode == "chatml":
        content = prefill + (choice.get("text") or "")
        if force:
            content += '"}}\n</tool_call>'
    if cfg.unescape_html:
        import html

        content = html.unescape(content)
    ep.finish_reason = choice.get("finish_reason")
    native = msg.get("tool_calls") or []
    calls_found: list[ToolCall] = []
    for tc in native:
        fn = (tc or {}).get("function") or {}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = _loads(args)
            except ValueError:
                args = None
        try:
            raw = json.dumps(fn)
        except (RecursionError, TypeError, ValueError):
            raw = "<a tool call too deep to write back>"
        calls_found.append(ToolCall(fn.get("name"), args, raw, tc.get("id")))
    if not calls_found and enabled:
        if cfg.tool_mode in ("text", "chatml") and ep.finish_reason == "stop" and "<tool_call>" in content \
                and "</tool_call>" not in content:
            content += "</tool_call>"  # the stop sequence is not echoed back
        calls_found = parse_text_tool_calls(content)
    return content, native, calls_found


def _answer_calls(index: SkillIndex | None, calls_found: list[ToolCall], shown: set[str], tool: Tool | None,
                  cfg: AgentConfig, ep: Episode, calls: int) -> tuple[list[str], int]:
    """The tool's answer to each call of a turn (refused beyond cfg.max_calls): (texts, calls so far)."""
    if calls >= cfg.max_calls:
        ep.refused_calls += len(calls_found)
        results = [LIMIT_REACHED] * len(calls_found)
    else:
        results = []
        for call in calls_found:
            if calls >= cfg.max_calls:
                ep.refused_calls += 1
                results.append(LIMIT_REACHED)
                continue
            calls += 1
            ret, text = _execute(index, call, shown, tool, cfg.top_k)
            if call.name is None or ret.error == "invalid arguments: expected a JSON object":
                ep.malformed_calls += 1
            ep.retrievals.append(ret)
            results.append(text)
    return results, calls


def _feed_back(messages: list[dict[str, Any]], cfg: AgentConfig, content: str, native: list[Any],
               calls_found: list[ToolCall], results: list[str], calls: int) -> str:
    """Give the model its calls' results in the conversation the tool mode uses; the turn's content
    as the conversation now holds it."""
    if native and cfg.tool_mode == "native":
        messages.append({"role": "assistant", "content": content or None, "tool_calls": native})
        for tc, text in zip(native, results, strict=False):
            messages.append({"role": "tool", "tool_call_id": tc.get("id"), "content": text})
    elif cfg.tool_mode == "chatml":
        # chatml mode keeps one user turn: the task, then every search and its skills. Small
        # models shown their own earlier <tool_call> turn tend to repeat it instead of answering.
        found = "\n".join(
            f"search_skills({json.dumps((c.arguments or {}).get('query') if isinstance(c.arguments, dict) else None)}) returned:\n{t}"
            for c, t in zip(calls_found, results, strict=False))
        messages[1] = {"role": "user", "content": messages[1]["content"] + "\n\n" + found
                       + "\n\n" + (FINAL_NUDGE if calls >= cfg.max_calls else AGAIN_NUDGE)}
    else:
        if native:  # a forced native call continued in text mode: write it as text
            content = "\n".join(
                "<tool_call>\n" + json.dumps({"name": c.name, "arguments": c.arguments}) + "\n</tool_call>"
                for c in calls_found)
        messages.append({"role": "assistant", "content": content})
        # Qwen/Hermes format: tool results come back in a user turn, which every chat template renders
        messages.append({"role": "user", "content": "\n".join(
            f"<tool_response>\n{t}\n</tool_response>" for t in results) + "\n\n" + (
            FINAL_NUDGE if calls >= cfg.max_calls else AGAIN_NUDGE)})
    return content


def run_episode(
    client: ChatClient,
    cfg: AgentConfig,
    task,
    enabled: bool,
    seed: int,
    index: SkillIndex | None,
    *,
    replay: list[dict[str, Any]] | None = None,
    tool: Tool | None = None,
) -> Episode:
    """Run one task in one condition; raises AgentError when the endpoint fails for good.

    `replay` (an enabled record's `meta.replay`) supplies the model's tool-call turns instead of
    asking the model, so an arm keeps the logged call(s); `tool` answers the calls instead of a
    search of `index` (the arm's tool). The prompt is the same either way.
    """
    spec = tool_spec(index.types if index is not None else ())
    replay = list(replay or [])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(task.is_code, enabled, cfg, spec)},
        {"role": "user", "content": task.prompt},
    ]
    ep = Episode(answer_text="")
    shown: set[str] = set()
    calls = 0
    start = time.monotonic()
    for _ in range(cfg.max_calls + 2):
        if enabled and ep.turns < len(replay):
            # a replayed turn: the logged call, verbatim; the model is not asked
            turn = replay[ep.turns]
            content = turn.get("content") or ""
            native = turn.get("tool_calls") or []
            calls_found = [ToolCall(c.get("name"), c.get("arguments"), content) for c in turn.get("calls") or []]
            ep.turns += 1
            ep.replayed += 1
        else:
            content, native, calls_found = _model_turn(client, cfg, task, messages, spec, seed, enabled, ep, calls)
        if not enabled or not calls_found:
            ep.answer_text = content
            break
        ep.invoked = True
        ep.call_turns.append({"content": content,
                              "calls": [{"name": c.name, "arguments": c.arguments} for c in calls_found],
                              **({"tool_calls": native} if native else {})})
        results, calls = _answer_calls(index, calls_found, shown, tool, cfg, ep, calls)
        content = _feed_back(messages, cfg, content, native, calls_found, results, calls)
        ep.answer_text = strip_tool_calls(content)
    ep.latency_s = time.monotonic() - start
    return ep
