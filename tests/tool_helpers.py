"""What the tests of tools in a chat share: a tiny model's template that takes tools, and a function to offer."""

from __future__ import annotations

# Written for these tests in the shape of Qwen2.5's template: tools as JSON lines in the system turn, each call as
# ``<tool_call>`` JSON with ``arguments | tojson``, results as a user turn of ``<tool_response>`` blocks.
TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n"
    "{%- if messages[0].role == 'system' %}{{ messages[0].content }}{% else %}Be helpful.{% endif %}\n<tools>"
    "{%- for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools><|im_end|>\n"
    "{%- elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{%- elif message.role == 'assistant' %}<|im_start|>assistant"
    "{%- if message.content %}\n{{ message.content }}{% endif %}"
    "{%- for call in message.tool_calls %}{% set call = call.function %}"
    '\n<tool_call>\n{"name": "{{ call.name }}", "arguments": {{ call.arguments | tojson }}}\n</tool_call>'
    "{%- endfor %}<|im_end|>\n"
    "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n</tool_response>"
    "<|im_end|>\n{%- endif %}{%- endfor %}<|im_start|>assistant\n"
)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
