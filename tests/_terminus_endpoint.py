"""A scripted OpenAI-compatible endpoint that answers Harbor's terminus-2 protocol deterministically
over ../shared/data/harbor-mini (issue 47's end-to-end test): it reads the status-report skill when
one is offered (`<available_skills>` in the first prompt), then writes the report in the skill's
format; without the skill it writes a report in another format (the verifier fails it). hello-file
and sum-numbers are solved either way. The run's pairs are therefore: status-report rescued with
the skill read, the other two tasks passing both ways."""

from __future__ import annotations

import json
from typing import Any

SKILL_MD = "/runtime/skills/status-report/SKILL.md"
FORMAT_SEEN = "# Status report format"  # the skill's body, once `cat` has shown it in the terminal


def _text(message: dict[str, Any]) -> str:
    c = message.get("content")
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c if isinstance(c, str) else ""


def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """terminus-2's next answer (analysis, plan, commands, task_complete) for the conversation."""
    users = [_text(m) for m in messages if m.get("role") == "user"]
    first, last = users[0], users[-1]
    done = {"analysis": "done", "plan": "nothing left", "commands": [], "task_complete": True}
    if "Are you sure you want to mark the task as complete" in last:
        return done
    if "hello.txt" in first:
        cmd = "printf 'Hello, Harbor!\\n' > /app/hello.txt\n"
    elif "sum.txt" in first:
        cmd = "echo 200 > /app/sum.txt\n"
    elif "status report" in first:
        offered = "<available_skills>" in first and "status-report" in first
        seen = any(FORMAT_SEEN in u for u in users[1:])
        if offered and not seen:
            return {"analysis": "a skill describes the format", "plan": "read it",
                    "commands": [{"keystrokes": f"cat {SKILL_MD}\n", "duration": 0.5}], "task_complete": False}
        cmd = ("printf '# STATUS\\nstate: green\\nowner: skillaudit\\n' > /app/report.txt\n" if seen
               else "printf 'Status: healthy\\nOwner: skillaudit\\n' > /app/report.txt\n")
    else:
        return done
    return {"analysis": "write the file", "plan": "one command", "commands": [{"keystrokes": cmd, "duration": 0.5}],
            "task_complete": True}


def responder(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """For tests/_harness_fakes.ScriptedServer: a chat completion whose content is the JSON answer."""
    content = json.dumps(reply(body.get("messages") or []))
    return 200, {"id": "x", "object": "chat.completion", "model": body.get("model", "scripted"),
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                              "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
