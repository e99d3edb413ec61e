"""Plain decoding against the default speculation on JSON answers (``response_format`` ``json_schema``: the schema in
the system message, the answer opened with ``{``), 6 requests twice, interleaved answer by answer in one process.

    python docs/bench/cpu/json_answers_ab.py
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from ds4spec.core.events import CycleReport, Finished, TextChunk
from ds4spec.core.messages import ChatMessage
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.faces.http.json_answers import SCHEMA_INSTRUCTION, with_instruction


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


TEXT, INT = {"type": "string"}, {"type": "integer"}
PERSON = obj(name=TEXT, age=INT, occupation=TEXT)
ORDER = obj(items={"type": "array", "items": obj(product=TEXT, quantity=INT)}, total={"type": "number"})
TODO = obj(title=TEXT, priority={"type": "string", "enum": ["low", "medium", "high"]},
           tags={"type": "array", "items": TEXT})
REQUESTS = [("Ada Lovelace, a mathematician, died at 36. Extract the person.", PERSON),
            ("Alan Turing was 41 and worked as a computer scientist.", PERSON),
            ("I bought 2 apples and 3 pears for 4.50 in total.", ORDER),
            ("Order: one keyboard, two mice. Total 80.", ORDER),
            ("Remind me to fix the login bug, it is urgent, tag it backend and auth.", TODO),
            ("Write the docs for the HTTP server sometime; low priority.", TODO)]


def main(rounds: int = 2) -> None:
    engines = {"plain": Engine.load(Settings(draft="none", ctx=4096)), "spec": Engine.load(Settings(ctx=4096))}
    seconds: dict[str, list[float]] = {"plain": [], "spec": []}
    for r in range(rounds):
        for i, (question, schema) in enumerate(REQUESTS):
            messages = with_instruction((ChatMessage("user", question),), SCHEMA_INSTRUCTION + json.dumps(schema))
            texts, drafts = {}, []
            for name in ("plain", "spec") if (r + i) % 2 else ("spec", "plain"):
                engine = engines[name]
                out = []
                for event in engine.generate(engine.chat_prompt(messages, opening="{"), max_tokens=64):
                    if isinstance(event, TextChunk):
                        out.append(event.text)
                    elif isinstance(event, CycleReport) and event.drafted and name == "spec":
                        drafts.append(f"{event.event}:{event.accepted}/{event.drafted}")
                    elif isinstance(event, Finished):
                        seconds[name].append(event.stats.generation_seconds)
                texts[name] = "".join(out)
            same = "same" if texts["plain"] == texts["spec"] else "DIFFERENT"
            print(r, question[:30], same, drafts, repr(texts["spec"][:80]))
    plain, spec = sum(seconds["plain"]), sum(seconds["spec"])
    ratios = [a / b for a, b in zip(seconds["plain"], seconds["spec"], strict=True)]
    median = statistics.median(ratios)
    print(f"plain {plain:.2f} s, speculating {spec:.2f} s: {plain / spec:.3f}x (median {median:.3f}x)")


if __name__ == "__main__":
    main()
