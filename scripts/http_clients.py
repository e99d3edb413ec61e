"""One client against four at once on a running ``ds4spec serve --http``: tokens/s per client and in total.

    python scripts/http_clients.py http://127.0.0.1:8080 --max-tokens 96

Each pass asks the same four chat prompts (greedy), first one after another from one client, then from four
clients at once. A client's rate is its answer's tokens over its own wall time, queueing included; the total is
all tokens over the pass's wall time. docs/http.md quotes the figures.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

import httpx

CODE = "def total(items, tax):\n    s = 0\n    for i in items:\n        s += i.price * i.qty\n    return s * (1 + tax)\n"  # noqa: E501
PROMPTS = [
    "Write a Python function that checks whether a string is a palindrome.",
    f"Add type hints to this function:\n\n```python\n{CODE}```",
    "Explain in three sentences what a hash map is.",
    "Write a bash one-liner that counts the lines of all .py files under the current directory.",
]


def ask(base: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    start = time.monotonic()
    body = {"model": "any", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0}
    answer = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=600).json()
    return {"tokens": answer["usage"]["completion_tokens"], "seconds": time.monotonic() - start,
            "text": answer["choices"][0]["message"]["content"], "stats": answer["ds4spec"]}


def run_pass(base: str, clients: int, max_tokens: int) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = [{} for _ in PROMPTS]
    start = time.monotonic()
    if clients == 1:
        for i, prompt in enumerate(PROMPTS):
            results[i] = ask(base, prompt, max_tokens)
    else:
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, ask(base, PROMPTS[i], max_tokens)))
                   for i in range(len(PROMPTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    wall = time.monotonic() - start
    rates = [r["tokens"] / r["seconds"] for r in results]
    tokens = sum(r["tokens"] for r in results)
    drafted = sum(r["stats"]["drafted_tokens"] for r in results)
    accepted = sum(r["stats"]["accepted_tokens"] for r in results)
    print(f"{clients} client(s): {tokens} tokens in {wall:.1f} s = {tokens / wall:.1f} tokens/s in total; per client "
          f"{', '.join(f'{r:.1f}' for r in rates)} tokens/s (mean {sum(rates) / len(rates):.1f}); generation alone "
          f"{', '.join(str(round(r['stats']['tokens_per_second'], 1)) for r in results)} tokens/s; "
          f"drafted {drafted}, accepted {accepted}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", help="the server, e.g. http://127.0.0.1:8080")
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    ask(args.base, "Say hello.", 8)  # warm-up: the first answer pays for loading pages of the model
    alone = run_pass(args.base, 1, args.max_tokens)
    together = run_pass(args.base, 4, args.max_tokens)
    same = sum(a["text"] == b["text"] for a, b in zip(alone, together, strict=True))
    print(f"answers identical between the passes: {same} of {len(alone)}")


if __name__ == "__main__":
    main()
