"""The built-in catalog agent through the protocol: the catalog is listed, loads are logged, and an arm replays the load turn with only the loaded body changed."""

from __future__ import annotations

from pathlib import Path

from skillaudit.agents.agent import AgentConfig
from skillaudit.agents.protocol import Skills, body_arm, call_agent, catalog_agent, catalog_hash
from skillaudit.agents.retrieve import SkillIndex
from skillaudit.engine.arm_runner import FILLER_TEXT
from skillaudit.library import load_library

REPO = Path(__file__).resolve().parents[1]


class FakeClient:
    """Answers a forced load with a skill name and an answer turn with a boxed number; keeps prompts."""

    def __init__(self, name: str = "percent-change") -> None:
        self.prompts: list[str] = []
        self.bodies: list[dict] = []
        self.name = name

    def complete(self, body):
        self.prompts.append(body["prompt"])
        self.bodies.append(body)
        text = self.name if body["prompt"].endswith('"name": "') else "So \\boxed{30}"
        return {"choices": [{"text": text, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}

    def close(self) -> None:
        pass


def _cfg() -> AgentConfig:
    return AgentConfig(endpoint="", model="m", tool_mode="chatml", tool_choice="required", max_calls=1)


def test_catalog_lists_loads_and_logs():
    index = SkillIndex(load_library(REPO / "skills"))
    client = FakeClient()
    skills = Skills(index)
    task = {"id": "t", "prompt": "By what percent did 50 rise to 65?", "kind": "answer", "seed": 1, "epoch": 1}
    ep = call_agent(catalog_agent(client, _cfg()), task, skills, None, "built-in")
    assert ep.answer.endswith("\\boxed{30}") and ep.invoked and ep.loaded == ["percent-change"]
    assert ep.listed == list(index.ids)
    assert ep.retrievals[0]["tool"] == "load_skill" and ep.retrievals[0]["skills"][0]["hash"] == index.hash_of("percent-change")
    assert "- percent-change: " in client.prompts[0] and index.get("percent-change").body.strip()[:60] in client.prompts[1]
    assert ep.usage == {"prompt_tokens": 20, "completion_tokens": 4}
    # the forced load's name is limited to the listed names (llama.cpp grammar), the answer turn is free
    assert '"percent-change"' in client.bodies[0]["grammar"] and "grammar" not in client.bodies[1]
    # disabled: no catalog, no loads
    client2 = FakeClient()
    ep2 = call_agent(catalog_agent(client2, _cfg()), task, None, None, "built-in")
    assert not ep2.invoked and "available_skills" not in client2.prompts[0] and len(client2.prompts) == 1
    assert len(catalog_hash(index)) == 16


def test_unknown_name_is_logged_and_not_s_call():
    index = SkillIndex(load_library(REPO / "skills"))
    skills = Skills(index)
    task = {"id": "t", "prompt": "q", "kind": "answer", "seed": 1, "epoch": 1}
    ep = call_agent(catalog_agent(FakeClient("no-such-skill"), _cfg()), task, skills, None, "built-in")
    assert not ep.invoked and ep.loaded == [] and ep.retrievals[0]["error"].startswith("unknown skill")


def test_arm_replay_changes_only_the_loaded_body():
    index = SkillIndex(load_library(REPO / "skills"))
    task = {"id": "t", "prompt": "By what percent did 50 rise to 65?", "kind": "answer", "seed": 1, "epoch": 1}
    real = FakeClient()
    ep = call_agent(catalog_agent(real, _cfg()), task, Skills(index), None, "built-in")
    replay = ep.meta["replay"]
    body = index.get("percent-change").body.strip()
    for arm in ("empty", "filler", "random", "mask"):
        fake = FakeClient("SHOULD-NOT-BE-ASKED")
        arm_ep = call_agent(catalog_agent(fake, _cfg(), {("t", 1): replay}), task,
                            Skills(index, body_arm=body_arm(arm, index, 7, FILLER_TEXT)), None, "built-in")
        assert len(fake.prompts) == 1  # the load turn was replayed, only the answer turn asked
        assert arm_ep.loaded == ["percent-change"]
        a, b = real.prompts[1], fake.prompts[0]
        i = a.index(body)
        assert b[:i] == a[:i]  # byte-identical up to the body
        tail = a[i + len(body):]
        assert b.endswith(tail)  # and after it
        if arm == "filler":
            assert len(b) == len(a) and body not in b
        if arm == "empty":
            assert len(b) == len(a) - len(body)
