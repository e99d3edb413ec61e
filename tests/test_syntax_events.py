"""Syntax events at the end of the text: real code in several languages, markdown with fences, incremental feeding.

Samples are written as they would be in a file, with ``«event»`` marking a place where the text is cut: the
tracker is given everything before the mark and must name that event.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4spec.policy.rules import RuleBook, load_rulebook
from ds4spec.policy.syntax import TAIL_BYTES, WINDOW_STEP, SyntaxTracker, code_event

MARK = re.compile(r"«([\w.]+)»")


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> RuleBook:
    return load_rulebook(user_dir=tmp_path_factory.mktemp("no-user-rules"))


def _cuts(sample: str) -> list[tuple[str, str]]:
    """(text before the mark, the mark's event) for every mark, the marks themselves removed."""
    plain, cuts, removed = MARK.sub("", sample), [], 0
    for match in MARK.finditer(sample):
        cuts.append((plain[: match.start() - removed], match.group(1)))
        removed += len(match.group(0))
    return cuts


def _event(book: RuleBook, language: str, text: str | bytes) -> tuple[str, str]:
    tracker = SyntaxTracker(book, language)
    tracker.begin(text.encode() if isinstance(text, str) else text)
    family, event = tracker.event()
    return family.name, event


CODE = {
    "python": '''\
import json
from pathlib import «keyword»Path


class Cache:
    """A JSON file «docstring»that remembers results."""

    def __init__(self, path: Path) -> None:
        «newline»self.path = path
        self.data = {}  # filled on «comment»first use

    «blank_line»def get(self, key: str, default=None):
        if not self.data:
            self.data = «assignment»json.loads(self.path.read_text(«open_bracket»))
        return self.data.get(key, «operator»default)«block_close»

    def put(self, key, value):
        self.data[key] += «assignment»value
        self.path.write_text(json.dumps(self.data, indent=2) + "\\n«string»")
        return «keyword»value
''',
    "javascript": '''\
import { readFile } from "node:fs/«string»promises";

/**
 * Loads the settings, «comment»merged with the defaults.
 */
export async function loadSettings(path) {
  const text = await readFile(path, 'ut«string»f8');
  // an empty file means «comment»defaults
  const parsed = text.trim() ? JSON.parse(text) : {};
  «newline»return { ...DEFAULTS, ...parsed }«block_close»;
}

const greet = (name) => `Hello, ${name}! «string»`;
let count = «assignment»0;
''',
    "typescript": '''\
interface Point {
  x: number;
  y: «operator»number;
}

export function distance(a: Point, b: Point): number {
  return Math.hypot(«open_bracket»a.x - b.x, a.y - «operator»b.y);
}«block_close»
''',
    "rust": '''\
use std::collections::«operator»HashMap;

/// Counts the words «docstring»of a text.
pub fn word_counts(text: &str) -> HashMap<String, usize> {
    let mut counts = «assignment»HashMap::new();
    for word in text.split_whitespace() {«open_bracket»
        // lower-case so that «comment»"The" and "the" count together
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }«block_close»
    println!("{} distinct «string»words", counts.len());
    «newline»counts
}
''',
    "go": '''\
package main

«blank_line»import (
	"fmt"
	"os"
)

// main prints the «comment»arguments.
func main() {
	args := «assignment»os.Args[1:]
	for i, arg := range args {
		fmt.Printf("%d: %s\\n«string»", i, arg)
		label := `raw «string»text`
		_ = label
	}«block_close»
	«newline»os.Exit(0)
}
''',
    "c": '''\
#include <stdio.h>
#include <string.h>

/* Reverses s in «comment»place. */
static void reverse(char *s) {
    size_t n = «assignment»strlen(s);
    for (size_t i = 0; i < n / 2; i++) {
        char c = s[i];«operator»
        «newline»s[i] = s[n - 1 - i];
        s[n - 1 - i] = c;
    }«block_close»
}

int main(void) {
    char word[] = "hello«string»";
    reverse(«open_bracket»word);
    return «keyword»0;
}
''',
    "cpp": '''\
#include <vector>

// Sum of the «comment»squares.
template <typename T>
T sum_squares(const std::vector<T>& xs) {
    T total{};
    for (const auto& x : xs) total += «assignment»x * x;
    return «keyword»total;
}
''',
    "shell": '''\
#!/usr/bin/env bash
set -euo pipefail

# Backs up every «comment»config file.
for f in ~/.config/*.toml; do
  «newline»cp "$f" "$f.bak"
  echo "saved «string»copies"
done«block_close»
COUNT=«assignment»$(ls ~/.config | wc -l)
ls -la | «operator»grep toml
''',
    "json": '''\
{
  "name": "ds4«string»spec",
  "version": "0.1.0",
  «newline»"scripts": {«open_bracket»
    "test": "pytest -q"
  }«block_close»,
  "keywords": [«open_bracket»"speculative", "decoding"]
}
''',
    "yaml": '''\
name: ci
on:
  push:
    branches: [«open_bracket»main]
jobs:
  test:
    runs-on: ubuntu-latest  # the «comment»cheapest runner
    steps:
      - «bullet»uses: actions/checkout@v4
      - name: "Run«string» the tests"
''',
}
CODE_CASES = [(language, text, event) for language, sample in CODE.items() for text, event in _cuts(sample)]
FAMILY = {"typescript": "javascript", "cpp": "c", "json": "data", "yaml": "data"}


@pytest.mark.parametrize(("language", "text", "event"), CODE_CASES,
                         ids=[f"{lang}-{i}-{event}" for i, (lang, _, event) in enumerate(CODE_CASES)])
def test_event_at_a_cut_in_real_code(book: RuleBook, language: str, text: str, event: str) -> None:
    assert _event(book, language, text) == (FAMILY.get(language, language), event), text[-60:]


def test_every_code_event_is_exercised_by_the_samples() -> None:
    seen = {event for _, _, event in CODE_CASES}
    assert seen >= {"docstring", "comment", "string", "bullet", "newline", "blank_line", "block_close",
                    "open_bracket", "assignment", "operator", "keyword"}


@pytest.mark.parametrize(("text", "event"), [
    ("    return total\n", "newline"), ("    return total\n    ", "newline"),
    ("def f():\n    \"\"\"Doc.\"\"\"\n    ", "newline"),
    ("    return total\n\n", "blank_line"), ("    return total\n\n\n", "blank_line"),
    ("    x = 1\n    \n    ", "blank_line"), ("    x = 1\n\n    ", "blank_line"),
], ids=["line-end", "indented", "after-docstring", "blank", "two-blank", "indented-blank", "blank-then-indent"])
def test_a_line_after_a_blank_one_is_its_own_event(book: RuleBook, text: str, event: str) -> None:
    """A new paragraph of code (or an answer's end) is told from a line that continues a block: a drafter's
    acceptance differs there, and each is learned apart."""
    assert code_event(book.family("python"), text) == event


@pytest.mark.parametrize(
    ("language", "text"),
    [("shell", "cp build/* dist/\nls "), ("python", 'paths = glob("src/*.py")\nx '),
     ("c", 'printf("/*");\nint x ')],
)
def test_a_slash_star_that_opens_no_comment_is_not_a_comment(book: RuleBook, language: str, text: str) -> None:
    assert _event(book, language, text)[1] == "code"


def test_an_open_block_comment_is_a_comment_even_where_the_lexer_cannot_close_it(book: RuleBook) -> None:
    text = "int main(void) {\n    /* first we count\n     * then we sum\n     * the "
    assert _event(book, "c", text)[1] == "comment"
    assert _event(book, "javascript", "const x = 1;\n/* TODO: x ")[1] == "comment"


@pytest.mark.parametrize(("end", "event"), [
    ("total +=", "assignment"), ("if a ==", "operator"), ("while", "keyword"), ("x = a <=", "operator"),
    ("y = " + "v" * 100 + " ", "code"), ("while not", "code"),
])
def test_the_end_of_a_long_window_decides_as_the_end_of_a_short_one(book: RuleBook, end: str, event: str) -> None:
    """The end-anchored checks look at the window's last characters only (a whole 1 KB window took 0.1 ms a check)."""
    family = book.family("python")
    for text in (end, "values = [1, 2, 3]\n" * 50 + end):
        assert code_event(family, text + (" " if event == "keyword" else "")) == event


def test_code_event_of_empty_text_is_a_new_line(book: RuleBook) -> None:
    assert code_event(book.family("python"), "") == "newline"


# -- markdown: prose, fences, code in the fence's language -------------------------------------------------

ANSWER = '''\
«markdown.sentence»Here is how to read a JSON «markdown.prose»file in Python.

«markdown.sentence»```py«markdown.fence_open»thon
«python.fence_open»import json

def load(path):
    # read the «python.comment»file
    with open(path) as f:
        «python.newline»return json.load(«python.open_bracket»f)
```
«markdown.newline»
«markdown.sentence»That is all. «markdown.sentence»Some notes:

- «markdown.bullet»it closes the «markdown.prose»file
* «markdown.bullet»it parses JSON
1. «markdown.bullet»first
2) «markdown.bullet»second

Now in Rust, with a tilde fence:

~~~ru«markdown.fence_open»st
«rust.fence_open»fn main() {
    let x = «rust.assignment»1;
}
~~~

A fence without a language:

```«markdown.prose»
«default.fence_open»x = [«default.open_bracket»1, 2]
```

Back to prose «markdown.prose»again.
'''
ANSWER_CASES = [(text, *mark.split(".")) for text, mark in _cuts(ANSWER)]


@pytest.mark.parametrize(("text", "family", "event"), ANSWER_CASES,
                         ids=[f"{i}-{f}-{e}" for i, (_, f, e) in enumerate(ANSWER_CASES)])
def test_event_at_a_cut_in_a_markdown_answer(book: RuleBook, text: str, family: str, event: str) -> None:
    assert _event(book, "markdown", text) == (family, event), text[-60:]


def test_the_answer_walks_prose_fence_code_and_back() -> None:
    families = [f for _, f, _ in ANSWER_CASES]
    assert families[0] == families[-1] == "markdown"
    assert {"python", "rust", "default"} <= set(families)
    assert families.index("python") < families.index("rust") < families.index("default")


def test_a_nested_shorter_fence_does_not_close_the_longer_one(book: RuleBook) -> None:
    # Inside ````markdown, the inner ```python line opens nothing: the family is still markdown's prose.
    text = "````markdown\n```python\ndef f(x):\n"
    family, event = _event(book, "markdown", text)
    assert family == "markdown" and event in ("newline", "fence_open")
    assert _event(book, "markdown", text + "```\n````\n\nDone")[0] == "markdown"


def test_a_fence_closes_only_with_its_own_character_and_no_tag(book: RuleBook) -> None:
    opened = "~~~python\nx = 1\n"
    assert _event(book, "markdown", opened + "```\ny = ")[0] == "python"  # backticks do not close tildes
    assert _event(book, "markdown", opened + "~~~python\ny = ")[0] == "python"  # a tag does not close
    assert _event(book, "markdown", opened + "~~~\nThe end")[0] == "markdown"


def test_a_fence_tag_names_its_family_by_alias(book: RuleBook) -> None:
    for tag, family in [("ts", "javascript"), ("c++", "c"), ("sh", "shell"), ("yml", "data"), ("mermaid", "default")]:
        assert _event(book, "markdown", f"Look:\n\n```{tag}\n") == (family, "fence_open")


def test_fences_mean_nothing_in_a_code_family(book: RuleBook) -> None:
    text = 'doc = """\n```python\nx = 1\n```\nMore '
    assert _event(book, "python", text) == ("python", "docstring")


def test_a_chat_answer_starts_at_a_sentence(book: RuleBook) -> None:
    assert _event(book, "markdown", b"") == ("markdown", "sentence")


# -- incremental: chunks, bounded cost -------------------------------------------------------------------

DOCUMENT = (
    MARK.sub("", ANSWER) + "\n## Caf\u00e9 \u2192 d\u00e9j\u00e0 vu\n\n```python\n" + MARK.sub("", CODE["python"])
    + "```\n\nAnd in Go:\n\n```go\n" + MARK.sub("", CODE["go"]) + "```\n\nThe end. "
).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, len(DOCUMENT)), sizes=st.lists(st.integers(1, 80), min_size=1, max_size=60),
       start=st.integers(0, len(DOCUMENT)))
def test_feeding_in_random_chunks_gives_the_event_of_feeding_at_once(
    book: RuleBook, cut: int, sizes: list[int], start: int
) -> None:
    text = DOCUMENT[:cut]
    whole = SyntaxTracker(book, "markdown")
    whole.begin(text)
    chunked = SyntaxTracker(book, "markdown")
    chunked.begin(text[: min(start, cut)])  # a prompt, then committed pieces (splitting UTF-8 characters too)
    rest, i = text[min(start, cut):], 0
    while rest:
        size = sizes[i % len(sizes)]
        chunked.extend(rest[:size])
        rest, i = rest[size:], i + 1
    assert chunked.event() == whole.event()
    assert chunked.in_code == whole.in_code


def test_a_tracker_can_be_begun_again(book: RuleBook) -> None:
    tracker = SyntaxTracker(book, "markdown")
    tracker.begin(b"```python\nx = ")
    assert tracker.event()[0].name == "python"
    tracker.begin(b"Plain prose ")
    assert tracker.event() == (book.family("markdown"), "prose")


def test_the_tracker_keeps_a_bounded_tail_whatever_the_document_length(book: RuleBook) -> None:
    line = b"    total = compute(values, weights) + offset  # running sum\n"
    tracker = SyntaxTracker(book, "python")
    tracker.begin(b"def f(values, weights, offset):\n")
    for _ in range(1_000_000 // len(line)):
        tracker.extend(line)
    assert len(tracker._tail) <= TAIL_BYTES
    tracker.extend(b"    return ")
    assert tracker.event()[1] == "keyword"


def _event_seconds(book: RuleBook, language: str, document: bytes) -> float:
    tracker = SyntaxTracker(book, language)
    tracker.begin(document)
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        tracker.event()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("language", ["python", "markdown"])
def test_an_event_costs_about_the_same_at_1_kb_and_at_1_mb(book: RuleBook, language: str) -> None:
    """Lexing the whole megabyte would take seconds, 1000 times the kilobyte's: a ratio of 10 leaves room for a
    loaded machine."""
    unit = MARK.sub("", CODE["python"]).encode()
    if language == "markdown":
        unit = b"Some prose about the code.\n\n```python\n" + unit + b"```\n\n"
    small = (unit * (1 + 1024 // len(unit)))[-1024:]
    large = unit * (1_000_000 // len(unit))
    assert _event_seconds(book, language, large) < 10 * _event_seconds(book, language, small) + 0.002


# -- resumed lexing: what is lexed of the window is kept, and the lexer resumes at the current line ------------

@pytest.mark.parametrize("language", sorted(CODE))
def test_events_after_every_commit_equal_those_of_a_tracker_begun_on_the_whole_text(
    book: RuleBook, language: str
) -> None:
    """A tracker asked after every commit (its lexer resumed line by line) names the event a tracker begun on all
    the text names (lexing the window at once), at every point of every sample, and past several windows."""
    text = (MARK.sub("", CODE[language]) * 4).encode()
    followed = SyntaxTracker(book, language)
    for end in range(0, len(text), 7):
        followed.extend(text[end: end + 7])
        assert followed.event() == _event_at(book, language, text[: end + 7]), text[max(0, end - 60): end + 7]


def _event_at(book: RuleBook, language: str, text: bytes) -> tuple[object, str]:
    tracker = SyntaxTracker(book, language)
    tracker.begin(text)
    return tracker.event()


def test_only_the_current_line_is_lexed_each_cycle(book: RuleBook, monkeypatch: pytest.MonkeyPatch) -> None:
    import ds4spec.policy.syntax as syntax

    lexed: list[int] = []
    real = syntax._lex
    monkeypatch.setattr(syntax, "_lex", lambda name, text, stack: lexed.append(len(text)) or real(name, text, stack))
    tracker = SyntaxTracker(book, "python")
    code = MARK.sub("", CODE["python"]).encode()
    tracker.extend(code[: code.rindex(b"\n", 0, 400) + 1])
    tracker.event()
    lexed.clear()
    for piece in (b"    total", b" = ", b"sum(", b"values", b")"):
        tracker.extend(piece)
        tracker.event()
    assert max(lexed) <= len(b"    total = sum(values)\n")


# -- the lexer's state across window moves: a docstring open at the window's first line ----------------------------

LONG_DOCSTRING = ('def find_zero(xs: list):\n    """ xs are coefficients of a polynomial.\n'
                  + "    find_zero returns only one zero point, even if there are many.\n" * 24 + '    """\n')
CODE_AFTER_IT = "    total = 0\n    for x in xs:\n        total += x * x\n" * 12


@pytest.mark.parametrize("begun", [True, False], ids=["begun on the prompt", "followed from the start"])
def test_code_after_a_long_docstring_is_code_wherever_the_window_starts(book: RuleBook, begun: bool) -> None:
    """As the text grows the window starts at a line inside the docstring; a lexer started afresh there reads the
    docstring's closing quotes as a string's opening, and named every later cycle ``string`` (traced on HumanEval/32,
    a completion begun on its prompt)."""
    assert len(LONG_DOCSTRING) > 2 * WINDOW_STEP  # the window moves inside the docstring
    tracker = SyntaxTracker(book, "python")
    prompt = LONG_DOCSTRING.encode()
    if begun:
        tracker.begin(prompt)
    else:
        for end in range(0, len(prompt), 9):
            tracker.extend(prompt[end: end + 9])
            tracker.event()
    events = []
    for end in range(0, len(CODE_AFTER_IT), 5):
        tracker.extend(CODE_AFTER_IT[end: end + 5].encode())
        events.append(tracker.event()[1])
    assert not {"string", "docstring"} & set(events), events
