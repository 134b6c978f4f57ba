"""Write the two small `.eval` logs beside this file with inspect_ai itself (its default format:
zip entries compressed with zstd, method 93). Run from this folder:

    python make_eval.py   # inspect_ai 0.3.285, mockllm/model with scripted outputs, no network

Four arithmetic samples; the enabled task offers a `search_skills` tool that returns a JSON list of
skill ids, the disabled task has no tool. By construction: `add` is rescued (5 -> 4 correct with
skills), `mul` is harmed, `sub` never calls the tool, `div` calls it and gets nothing back.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool

MODEL = "mockllm/model"
# sample id -> (question, target, answer with skills, answer without, skills the tool returns)
CASES = {
    "add": ("2+2?", "4", "4", "5", ["arith-basics", "float-tolerance-comparison"]),
    "mul": ("3*3?", "9", "8", "9", ["arith-basics"]),
    "sub": ("7-2?", "5", "5", "5", None),
    "div": ("8/2?", "4", "4", "4", []),
}


@tool
def search_skills():
    async def execute(query: str):
        """Search the skill library.

        Args:
            query: What the skill should help with.
        """
        return json.dumps([{"id": s, "score": 9.0 - i} for i, s in enumerate(CASES[query][4] or [])])

    return execute


def scripted(enabled: bool):
    by_question = {c[0]: sid for sid, c in CASES.items()}

    def outputs(input, tools, tool_choice, config):
        sid = by_question[next(m.text for m in input if m.role == "user")]
        called = any(m.role == "tool" for m in input)
        if tools and enabled and CASES[sid][4] is not None and not called:
            out = ModelOutput.for_tool_call(MODEL, "search_skills", {"query": sid})
        else:
            out = ModelOutput.from_content(MODEL, CASES[sid][2] if enabled else CASES[sid][3])
        out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return out

    return outputs


def main() -> None:
    here = Path(__file__).parent
    for enabled, name in ((True, "skills_on"), (False, "skills_off")):
        samples = [Sample(id=sid, input=c[0], target=c[1]) for sid, c in CASES.items()]
        solver = [use_tools(search_skills()), generate()] if enabled else [generate()]
        task = Task(dataset=samples, solver=solver, scorer=match(), name=name)
        tmp = here / f"_{name}"
        [log] = inspect_eval(task, model=get_model(MODEL, custom_outputs=scripted(enabled)),
                             log_dir=str(tmp), display="none", max_samples=1)
        assert log.status == "success", log.error
        shutil.move(log.location, here / f"{name}.eval")
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
