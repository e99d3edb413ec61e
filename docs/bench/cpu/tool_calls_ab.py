"""Plain decoding against the default speculation on answers that call a function, answer by answer and interleaved,
in one process: 8 questions with 4 tools offered, each answered as the model chooses (``auto``) and opened as a
forced call (``required``), ``ROUNDS`` times. ``json`` shows a drafter the tools as the JSON the target reads (run
84's first code), ``names`` as a list of names (what ``core.messages.as_text_messages`` does now).

    python docs/bench/cpu/tool_calls_ab.py names 2
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence

import ds4spec.engine.engine as engine_module
from ds4spec.core.events import CycleReport, Finished, TextChunk
from ds4spec.core.messages import ChatMessage, ToolSpec, as_text_messages
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings


def tool(name: str, description: str, **properties: str) -> ToolSpec:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {k: {"type": "string", "description": v} for k, v in properties.items()}}}}


TOOLS = [tool("get_weather", "The current weather in a city.", city="The city's name"),
         tool("read_file", "Read a file of the project.", path="The file's path"),
         tool("run_tests", "Run the project's test suite, or one test file.", path="A test file; all when left out"),
         tool("search_code", "Search the project's code for a regular expression.", pattern="A regular expression",
              glob="Which files")]
QUESTIONS = ["What is the weather in Paris right now?", "Show me what is in setup.py.", "Is it raining in Berlin?",
             "Open src/main.rs and tell me what it does.", "Run the tests in tests/test_api.py.",
             "Where is parse_config defined?", "Find every TODO in the Python files.", "Do the tests pass?"]
OPENINGS = {"auto": "", "required": '<tool_call>\n{"name": "'}


def as_json_messages(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> tuple[ChatMessage, ...]:
    listed = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (ChatMessage("system", f"# Tools\n<tools>\n{listed}\n</tools>"), *as_text_messages(messages))


def main(view: str, rounds: int) -> None:
    if view == "json":
        engine_module.as_text_messages = as_json_messages  # type: ignore[assignment]
    plain, spec = Engine.load(Settings(draft="none", ctx=4096)), Engine.load(Settings(ctx=4096))
    seconds: dict[str, dict[str, list[float]]] = {"plain": {k: [] for k in OPENINGS}, "spec": {k: [] for k in OPENINGS}}
    for r in range(rounds):
        for choice, opening in OPENINGS.items():
            for i, question in enumerate(QUESTIONS):
                order = [("plain", plain), ("spec", spec)] if (r + i) % 2 else [("spec", spec), ("plain", plain)]
                texts, drafts = {}, []
                for name, engine in order:
                    prompt = engine.chat_prompt([ChatMessage("user", question)], tools=TOOLS, opening=opening)
                    out = []
                    for event in engine.generate(prompt, max_tokens=96):
                        if isinstance(event, TextChunk):
                            out.append(event.text)
                        elif isinstance(event, CycleReport) and event.drafted and name == "spec":
                            drafts.append(f"{event.event}:{event.accepted}/{event.drafted}")
                        elif isinstance(event, Finished):
                            seconds[name][choice].append(event.stats.generation_seconds)
                    texts[name] = "".join(out)
                same = "same" if texts["plain"] == texts["spec"] else "DIFFERENT"
                print(r, choice, question[:32], same, drafts, repr(texts["spec"][:60]))
    for choice in OPENINGS:
        p, s = seconds["plain"][choice], seconds["spec"][choice]
        print(f"{choice}: plain {sum(p):.2f} s, speculating {sum(s):.2f} s: {sum(p) / sum(s):.3f}x "
              f"(median per answer {statistics.median(a / b for a, b in zip(p, s, strict=True)):.3f}x)")
    total_p = sum(sum(v) for v in seconds["plain"].values())
    total_s = sum(sum(v) for v in seconds["spec"].values())
    print(f"all: {total_p / total_s:.3f}x")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
