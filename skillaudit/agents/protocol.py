"""The agent protocol: `agent(task: dict, skills) -> str | dict`, and the runs made through it.

`skills` is None on the disabled run, else a `Skills` object with `.catalog()` (names and
descriptions), `.search(query, k=3)` (BM25, as `search_skills`) and `.load(name)` (a skill's body).
Every `search` and `load` is logged as a retrieval (query, ids, scores, content hash); what
`catalog()` listed is logged in `meta.listed`. A dict return may carry `answer`, `usage`
(`prompt_tokens`, `completion_tokens`) and `meta`.

The built-in model agents are expressed through the same protocol: `search` (the paper's
`search_skills` loop, `agent.run_episode`) and `catalog` (Agent Skills progressive disclosure: the
system prompt lists every skill's name and description and a `load_skill(name)` tool returns the
body; a task is in S_call when it loaded at least one skill).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import inspect
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skillaudit.agents.agent import (
    ANSWER_PREFILL,
    CHATML_STOP,
    STOP_TEXT,
    SYSTEM_CODE,
    AgentConfig,
    ChatClient,
    Tool,
    parse_text_tool_calls,
    render_chatml,
    run_episode,
    strip_tool_calls,
)
from skillaudit.agents.retrieve import Hit, Retrieval, SkillIndex, render_result
from skillaudit.errors import HarnessError, InputError

LOAD_TOOL = "load_skill"
SYSTEM_GENERAL = (
    "You are a careful assistant. Work the task out in a few short lines, then give the final "
    "answer as \\boxed{ANSWER} with only the answer inside."
)
CATALOG_INTRO = (
    "You have a library of skills: short, tested guides. Each is listed below by name with a "
    "description of when it applies. To read one in full, call load_skill with its exact name; "
    "load at most {max_calls}, then write your answer.\n\n<available_skills>\n{listing}\n</available_skills>"
)
LOAD_SPEC = {"type": "function", "function": {
    "name": LOAD_TOOL, "description": "Load a skill's full instructions by its exact name.",
    "parameters": {"type": "object", "properties": {"name": {"type": "string", "description": "the skill's name"}},
                   "required": ["name"]}}}
TEXT_TOOLS = (
    "\n\n# Tools\n\n<tools>\n{tools}\n</tools>\n\nTo call a function, write\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
FORCED_LOAD = '<tool_call>\n{"name": "load_skill", "arguments": {"name": "'


def catalog_hash(index: SkillIndex) -> str:
    """A hash of what a catalog lists (names and descriptions, in order): if it changes, every
    catalog-mode episode saw another prompt."""
    h = hashlib.sha256()
    for s in index.skills:
        h.update(f"{s.id}\0{s.description.strip()}\0".encode())
    return h.hexdigest()[:16]


def library_hash(index: SkillIndex) -> str:
    """A hash of every offered skill's content, in order (each record's `meta.library_hash`)."""
    return hashlib.sha256("".join(s.content_hash for s in index.skills).encode()).hexdigest()[:16]


def catalog_listing(index: SkillIndex) -> str:
    return "\n".join(f"- {s.id}: {' '.join(s.description.split())}" for s in index.skills)


#: an arm's replacement of a loaded body: (skill id, body) -> the text the agent gets instead
BodyArm = Callable[[str, str], str]


class Skills:
    """What an enabled run's agent may do with the library; every call is logged."""

    def __init__(self, index: SkillIndex, top_k: int = 3, body_arm: BodyArm | None = None,
                 search_arm: Tool | None = None) -> None:
        self._index = index
        self.top_k = top_k
        self.body_arm = body_arm
        #: an arm's answer to a `search_skills` call instead of a search (`run --arms`: engine/arm_runner.py)
        self.search_arm = search_arm
        #: set by the built-in search loop: the model called the tool (even a call that found nothing)
        self.called = False
        self.retrievals: list[dict[str, Any]] = []
        self.listed: list[str] = []
        self.loaded: list[str] = []

    def catalog(self) -> list[dict[str, str]]:
        """Every skill's name and description (logged as `meta.listed`)."""
        out = [{"name": s.id, "description": s.description.strip()} for s in self._index.skills]
        self.listed = [s["name"] for s in out]
        return out

    def search(self, query: Any, k: int = 3, types: Any = None) -> list[dict[str, Any]]:
        """BM25 top-k over descriptions and bodies: `[{name, score, description, body}]`."""
        ret = self._index.search(query, types, k=int(k))
        self.retrievals.append({**ret.to_record(), "tool": "search"})
        return [{"name": h.id, "score": h.score, "description": self._index.get(h.id).description,  # type: ignore[union-attr]
                 "body": self._body(h.id)} for h in ret.hits]

    def search_tool(self, query: Any, types: Any, shown: set[str]) -> tuple[Retrieval, str]:
        """The built-in `search_skills` tool's answer to one call: a BM25 search (or the arm's
        answer). The search agent logs every call of its episode with `log_calls`, including the
        malformed ones that never reach the tool, in the order the model made them."""
        if self.search_arm is not None:
            return self.search_arm(query, types, shown)
        ret = self._index.search(query, types, k=self.top_k)
        return ret, render_result(self._index, ret, shown)

    def log_calls(self, calls: list[Retrieval]) -> None:
        """Log the built-in loop's `search_skills` calls (the records `run --benchmark` always wrote)."""
        self.retrievals.extend(r.to_record() for r in calls)

    def load(self, name: Any) -> str | None:
        """A skill's body (None for an unknown name); logged as a retrieval with one hit."""
        skill = self._index.get(name) if isinstance(name, str) else None
        if skill is None:
            self.retrievals.append({"tool": LOAD_TOOL, "query": name, "skills": [],
                                    "error": f"unknown skill {str(name)[:80]!r}"})
            return None
        self.retrievals.append({"tool": LOAD_TOOL, "query": name, "error": None, "skills": [
            {"id": skill.id, "score": 1.0, "rank": 1, "hash": skill.content_hash[:16]}]})
        self.loaded.append(skill.id)
        return self._body(skill.id)

    def _body(self, sid: str) -> str:
        skill = self._index.get(sid)
        body = skill.body.strip() if skill is not None else ""
        return self.body_arm(sid, body) if self.body_arm else body

    @property
    def invoked(self) -> bool:
        """S_call: at least one skill came back (a load, or a search with hits), or the built-in
        search loop called its tool (`invoked` as DESIGN §3.1 logs it; what came back is in the
        retrievals)."""
        return self.called or any(r.get("skills") for r in self.retrievals)


def load_agent(spec: str) -> Callable[[dict[str, Any], Any], Any]:
    """Import `module:callable`, or the installed agent plugin named `spec` (`skillaudit.util.plugins`),
    and check it can be called as `agent(task, skills)`."""
    from skillaudit.tasks.taskfile import check_callable, check_signature

    if ":" in spec:
        return check_callable(spec, f"--agent {spec}", 2, "agent")
    from skillaudit.util.plugins import load

    return check_signature(load("agents", spec, f"--agent {spec}"), f"--agent {spec}", 2, "agent", spec)


# ---- built-in model agents through the protocol -------------------------------------------------
class _TaskView:
    def __init__(self, task: dict[str, Any]) -> None:
        self.prompt = task["prompt"]
        self.is_code = task.get("kind") == "tests" or bool(task.get("is_code"))


def search_agent(client: ChatClient, cfg: AgentConfig,
                 replays: dict[tuple[str, int], list[dict[str, Any]]] | None = None) -> Callable[..., dict[str, Any]]:
    """The paper's `search_skills` loop (`agent.run_episode`) as a protocol agent: what `run
    --benchmark`, `--tasks` (search mode), `--reuse` and the arms call.

    `replays` ({(task id, epoch): an enabled record's tool-call turns}) supplies the logged call
    turns instead of asking the model (the arms); the tool's answer comes from `skills.search_tool`
    (a search, or the arm's tool). The returned `meta` holds what the records log about the loop:
    `turns`, `finish_reason`, `tool_calls`, `malformed_calls`, `refused_calls`, `replayed_turns`
    (replayed runs) and `replay` (the call turns an arm can replay).
    """

    def agent(task: dict[str, Any], skills: Skills | None) -> dict[str, Any]:
        seed = int(task.get("seed", 0))
        index = skills._index if skills is not None else None
        replay = (replays or {}).get((str(task["id"]), int(task.get("epoch", 1)))) if skills is not None else None
        ep = run_episode(client, cfg, _TaskView(task), skills is not None, seed, index, replay=replay,
                         tool=skills.search_tool if skills is not None else None)
        if skills is not None:
            skills.log_calls(ep.retrievals)
            skills.called = ep.invoked
        meta: dict[str, Any] = {"turns": ep.turns, "finish_reason": ep.finish_reason,
                                "tool_calls": len(ep.retrievals) + ep.refused_calls,
                                "malformed_calls": ep.malformed_calls, "refused_calls": ep.refused_calls}
        if ep.replayed:
            meta["replayed_turns"] = ep.replayed
        if ep.call_turns:
            meta["replay"] = ep.call_turns
        return {"answer": ep.answer_text, "usage": ep.usage, "meta": meta}

    return agent


def catalog_agent(client: ChatClient, cfg: AgentConfig,
                  replays: dict[tuple[str, int], list[dict[str, Any]]] | None = None) -> Callable[..., dict[str, Any]]:
    """Agent Skills progressive disclosure: names + descriptions in the system prompt, `load_skill`.

    chatml mode (raw prompts over /v1/completions) and text mode (chat completions, the tool call
    written as `<tool_call>` JSON); `--tool-choice required` prefills the first enabled turn with a
    `load_skill` call whose name the model writes. `replays` ({(task id, epoch): an enabled record's
    `meta.replay`}) supplies the load turns of a logged run instead of asking the model (the arms):
    the prompts are then byte-identical to the logged run's except for what the loads returned.
    """

    def agent(task: dict[str, Any], skills: Skills | None) -> dict[str, Any]:
        seed = int(task.get("seed", 0))
        code = task.get("kind") == "tests"
        base = SYSTEM_CODE if code else SYSTEM_GENERAL
        system = base
        if skills is not None:
            skills.catalog()
            system = base + "\n\n" + CATALOG_INTRO.format(max_calls=cfg.max_calls,
                                                          listing=catalog_listing(skills._index))
            system += TEXT_TOOLS.format(tools=json.dumps(LOAD_SPEC))
        user = task["prompt"]
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        turns, loads, finish = 0, 0, None
        call_turns: list[dict[str, Any]] = []
        answer = ""
        for _ in range(cfg.max_calls + 2):
            can_call = skills is not None and loads < cfg.max_calls
            force = can_call and turns == 0 and cfg.tool_choice == "required"
            # the catalog stays in the system prompt on the answer turn (as in Claude Code), so every
            # enabled turn shares one long prefix that servers with prompt caching evaluate once
            sys_now = system
            msgs = [{"role": "system", "content": sys_now}, {"role": "user", "content": user}]
            prefill = FORCED_LOAD if force else ("" if can_call else ANSWER_PREFILL["code" if code else "math"])
            body: dict[str, Any] = {"model": cfg.model, "temperature": cfg.temperature,
                                    "max_tokens": cfg.max_tokens, "seed": seed, **cfg.extra_body}
            replay = (replays or {}).get((str(task["id"]), int(task.get("epoch", 1)))) if skills is not None else None
            if force and cfg.tool_mode == "chatml" and skills is not None:
                # llama.cpp's `grammar` limits the forced name to the listed ones: the enum of the tool's
                # schema, which raw completions cannot carry otherwise
                body["grammar"] = "root ::= (" + " | ".join(json.dumps(s) for s in skills._index.ids) + ")"
            if replay is not None and turns < len(replay):
                text, data = replay[turns]["content"], {"choices": [{"finish_reason": "replayed"}]}
            elif cfg.tool_mode == "chatml":
                body["prompt"] = render_chatml(msgs) + prefill
                body["stop"] = [*CHATML_STOP, '"'] if force else (
                    [*CHATML_STOP, "\n```"] if prefill == ANSWER_PREFILL["code"] else CHATML_STOP)
                data = client.complete(body)
                text = prefill + (data["choices"][0].get("text") or "")
                if force:
                    text += '"}}\n</tool_call>'
            else:
                body["messages"] = msgs
                body["stop"] = STOP_TEXT
                data = client.chat(body)
                text = (data["choices"][0].get("message") or {}).get("content") or ""
            turns += 1
            finish = data["choices"][0].get("finish_reason")
            u = data.get("usage") or {}
            for k in usage:
                if isinstance(u.get(k), int):
                    usage[k] += u[k]
            calls = parse_text_tool_calls(text + ("</tool_call>" if "<tool_call>" in text and "</tool_call>" not in text else "")) if can_call else []
            calls = [c for c in calls if c.name == LOAD_TOOL]
            if not calls:
                answer = strip_tool_calls(text)
                break
            call_turns.append({"content": text, "calls": [{"name": c.name, "arguments": c.arguments} for c in calls]})
            found = []
            for c in calls[: cfg.max_calls - loads]:
                name = c.arguments.get("name") if isinstance(c.arguments, dict) else None
                loads += 1
                got = skills.load(name) if skills is not None else None
                found.append(f"load_skill({json.dumps(name)}) returned:\n"
                             + (f"## Skill: {name}\n{got}" if got is not None else f"No skill named {name!r}."))
            user = user + "\n\n" + "\n\n".join(found) + "\n\nUse what helps and write your final answer."
        return {"answer": answer, "usage": usage,
                "meta": {"turns": turns, "finish_reason": finish, **({"replay": call_turns} if call_turns else {})}}

    return agent


# ---- arms for catalog mode: what a load returns instead of the body ------------------------------
def body_arm(name: str, index: SkillIndex, seed: int, filler: str) -> BodyArm:
    """random: another skill's body; filler: same-length text without a procedure; empty: nothing;
    mask: the body or nothing with probability 1/2 each (seeded per skill)."""
    rng = random.Random(seed)

    def arm(sid: str, body: str) -> str:
        if name == "empty":
            return ""
        if name == "filler":
            return (filler * (len(body) // max(1, len(filler)) + 1))[: len(body)]
        if name == "random":
            others = [s for s in index.skills if s.id != sid]
            return rng.choice(others).body.strip() if others else ""
        if name == "mask":
            return body if mask_keeps(seed, sid) else ""
        raise InputError(f"--arms {name}: not available in catalog mode (random, filler, empty, mask)")

    return arm


def mask_keeps(seed: int, sid: str) -> bool:
    """The mask arm's draw: whether skill `sid` keeps its body under mask seed `seed` (p = 1/2)."""
    return random.Random(f"{seed}:{sid}").random() < 0.5


# ---- one episode through the protocol -------------------------------------------------------------
@dataclass
class ProtocolEpisode:
    """What `call_agent` returns: the answer and what was logged."""

    answer: str
    retrievals: list[dict[str, Any]] = field(default_factory=list)
    listed: list[str] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    invoked: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0


class AgentFailure(HarnessError):
    """The agent raised, hung past --episode-timeout or returned something unusable."""


_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="skillaudit-agent")


def call_agent(agent: Callable[..., Any], task: dict[str, Any], skills: Skills | None,
               timeout: float | None, name: str, trusted: bool = False) -> ProtocolEpisode:
    """Call the agent (with a timeout), check what it returned, collect what was logged.

    `trusted` (skillaudit's own agents): an exception that is not a HarnessError is a bug in
    skillaudit, not the user's agent, and propagates as it is (the runner logs it as `unexpected`).
    """
    start = time.monotonic()
    fut = _POOL.submit(agent, task, skills)
    try:
        out = fut.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise AgentFailure(f"{name} did not return within {timeout:g}s on task {task['id']}") from None
    except HarnessError:
        raise
    except Exception as exc:
        if trusted:
            raise
        raise AgentFailure(f"{name} raised {type(exc).__name__} on task {task['id']}: {str(exc)[:300]}") from None
    latency = time.monotonic() - start
    usage: dict[str, int] = {}
    meta: dict[str, Any] = {}
    if isinstance(out, dict):
        answer = out.get("answer")
        raw_usage = out.get("usage") or {}
        if isinstance(raw_usage, dict):
            usage = {k: int(v) for k, v in raw_usage.items() if isinstance(v, int) and not isinstance(v, bool)}
        if isinstance(out.get("meta"), dict):
            meta = out["meta"]
    else:
        answer = out
    if not isinstance(answer, str):
        raise AgentFailure(f"{name} returned a {type(answer).__name__} answer on task {task['id']}; "
                           "expected a string (or a dict with a string 'answer')")
    ep = ProtocolEpisode(answer=answer, usage=usage, meta=meta, latency_s=latency)
    if skills is not None:
        ep.retrievals = list(skills.retrievals)
        ep.listed, ep.loaded, ep.invoked = list(skills.listed), list(skills.loaded), skills.invoked
    return ep


def check_agent_signature(fn: Callable[..., Any], name: str) -> None:
    try:
        inspect.signature(fn).bind(None, None)
    except TypeError:
        raise InputError(f"--agent {name}: must take (task, skills)") from None
    except ValueError:
        pass


# unused import guard for linters (Hit is part of the public surface for agents building hits)
__all__ = [
    "AgentFailure",
    "Hit",
    "ProtocolEpisode",
    "Skills",
    "body_arm",
    "call_agent",
    "catalog_agent",
    "catalog_hash",
    "library_hash",
    "load_agent",
    "search_agent",
]
