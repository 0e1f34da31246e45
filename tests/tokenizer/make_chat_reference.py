#!/usr/bin/env python3
"""Writes tests/data/tokenizer/chat_reference.json: chat templates rendered as transformers does.

transformers' apply_chat_template runs the model's Jinja template in a sandboxed jinja2 environment
(trim_blocks, lstrip_blocks, raise_exception, strftime_now) over the messages; the rendered text,
tokenized with special tokens recognised, is what the model was tuned on. This script renders the
same way (jinja2 from Debian: python3-jinja2), for templates of each format fused recognises:
  qwen2_5   - tests/data/tokenizer/qwen2/tokenizer_config.json's (Qwen's, with <think> handling)
  qwen2     - Qwen2's first template (a default system message), written out here
  llama3    - Llama 3's format, written here (no Meta file is copied into the repository)
  llama3_1  - Llama 3.1's dated system turn, written here
  mistral_3 - Mistral v0.3's [INST] form, written here
  mistral_1 - Mistral v0.1's (" [/INST]", no space before an answer), written here
  mistral_3_trim - Mistral v0.3's as published (answers | trim)
  qwen2_5_math - ChatML with a default system message holding braces and a backslash (\boxed{})
  qwq       - ChatML whose generation prompt opens a <think> block, a comment with a system turn in it
  hermes    - ChatML after {{ bos_token }}, its default system message in double quotes with an apostrophe
  smollm2   - ChatML with a default system message written with real newlines
  llama2    - Llama 2 chat's <<SYS>> form
test_chat_template.cpp checks that fused's rendering gives tok.encode(text) for every case.
Run from the repository root: python3 tests/tokenizer/make_chat_reference.py
"""
import json
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
         "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
         "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
         "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
          "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' %}"
          "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA3_1 = ("{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
            "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}"
            "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = \"\" %}{%- endif %}"
            "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}"
            "{{- \"Cutting Knowledge Date: December 2023\\n\" }}{{- \"Today Date: \" + date_string + \"\\n\\n\" }}"
            "{{- system_message }}{{- \"<|eot_id|>\" }}"
            "{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
            " + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
            "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}")
MISTRAL_3 = ("{%- if messages[0][\"role\"] == \"system\" %}{%- set system_message = messages[0][\"content\"] %}"
             "{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}"
             "{{- bos_token }}{%- for message in loop_messages %}"
             "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
             "{{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant...') }}"
             "{%- endif %}{%- if message[\"role\"] == \"user\" %}"
             "{%- if loop.last and system_message is defined %}{{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}"
             "{%- else %}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}{%- endif %}"
             "{%- elif message[\"role\"] == \"assistant\" %}{{- \" \" + message[\"content\"] + eos_token}}"
             "{%- endif %}{%- endfor %}")
MISTRAL_1 = ("{{ bos_token }}{% for message in messages %}"
             "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
             "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
             "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
             "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}")

MISTRAL_3_TRIM = MISTRAL_3.replace("{{- \" \" + message[\"content\"] + eos_token}}", "{{- \" \" + message[\"content\"]|trim + eos_token}}")
assert MISTRAL_3_TRIM != MISTRAL_3
QWEN2_5_MATH = QWEN2.replace("You are a helpful assistant.", "Please reason step by step, and put your final answer within \\\\boxed{}.")
QWQ = ("{#- an old system turn: '<|im_start|>system\nYou are X.<|im_end|>\n' #}"
       "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{%- endfor %}"
       "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n<think>\n' }}{%- endif %}")
HERMES = ("{{ bos_token }}{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ \"<|im_start|>system\nYou're a helpful assistant.<|im_end|>\n\" }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
           "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
           "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
          "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
          "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if loop.index0 == 0 and system_message != false %}"
          "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
          "{% else %}{% set content = message['content'] %}{% endif %}"
          "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
          "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")

with open("tests/data/tokenizer/qwen2/tokenizer_config.json") as f:
    QWEN2_5 = json.load(f)["chat_template"]

TEMPLATES = {
    # name: (template, tokenizer (a path under tests/data/tokenizer), bos, eos)
    "qwen2_5": (QWEN2_5, "qwen2", None, "<|endoftext|>"),
    "qwen2": (QWEN2, "qwen2", None, "<|endoftext|>"),
    "llama3": (LLAMA3, "llama3_tiny", "<|begin_of_text|>", "<|eot_id|>"),
    "llama3_1": (LLAMA3_1, "llama3_tiny", "<|begin_of_text|>", "<|eot_id|>"),
    "mistral_3": (MISTRAL_3, "sentencepiece_tiny", "<s>", "</s>"),
    "mistral_1": (MISTRAL_1, "sentencepiece_tiny", "<s>", "</s>"),
    "mistral_3_trim": (MISTRAL_3_TRIM, "sentencepiece_tiny", "<s>", "</s>"),
    "qwen2_5_math": (QWEN2_5_MATH, "qwen2", None, "<|endoftext|>"),
    "qwq": (QWQ, "qwen2", None, "<|endoftext|>"),
    "hermes": (HERMES, "qwen2", "<|endoftext|>", "<|im_end|>"),
    "smollm2": (SMOLLM2, "qwen2", None, "<|im_end|>"),
    "llama2": (LLAMA2, "sentencepiece_tiny", "<s>", "</s>"),
}

CONVERSATIONS = [
    ([{"role": "user", "content": "In the beginning"}], True),
    ([{"role": "system", "content": "Answer in the words of Genesis."}, {"role": "user", "content": "What was made first?"}], True),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who made the light?"},
      {"role": "assistant", "content": "God said, Let there be light: and there was light."},
      {"role": "user", "content": "  And the darkness?\n\n"}], True),
    ([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there"}], False),
    ([{"role": "user", "content": "line one\n\nline two"}, {"role": "assistant", "content": "<think>\nA thought.\n</think>\n\nThe answer."},
      {"role": "user", "content": "and then?"}], True),
    # Answers and questions with whitespace around them (Unicode's too), a conversation an answer ends.
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "\u00a0Who?\u3000"},
      {"role": "assistant", "content": " the answer \n"}, {"role": "user", "content": "And then?\u2028"}], True),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there"}], False),
    # Qwen3: an answer's leading newlines go (content.lstrip('\n')); a tool's answer is not a question.
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "\n\nHello"}], False),
    ([{"role": "user", "content": "What is six times seven?"}, {"role": "assistant", "content": "<think>\nAsk the tool.\n</think>\n\nCalling it."},
      {"role": "user", "content": "<tool_response>\n42\n</tool_response>"}], True),
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def render(template, messages, add_generation_prompt, bos, eos):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            bos_token=bos or "", eos_token=eos or "")


cases = []
for name, (template, tokenizer, bos, eos) in TEMPLATES.items():
    for messages, generation in CONVERSATIONS:
        if name.startswith("mistral") and messages[0]["role"] == "system" and name == "mistral_1":
            continue  # v0.1's template has no system message
        try:
            text = render(template, messages, generation, bos, eos)
        except jinja2.exceptions.TemplateError as e:
            cases.append({"template": name, "tokenizer": tokenizer, "messages": messages, "add_generation_prompt": generation,
                          "error": str(e)})
            continue
        cases.append({"template": name, "tokenizer": tokenizer, "messages": messages, "add_generation_prompt": generation,
                      "text": text})

out = {"templates": {name: {"chat_template": t[0], "bos_token": t[2], "eos_token": t[3]} for name, t in TEMPLATES.items()},
       "cases": cases}
with open("tests/data/tokenizer/chat_reference.json", "w") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(f"{len(cases)} cases")
