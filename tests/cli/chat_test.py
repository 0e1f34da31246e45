#!/usr/bin/env python3
"""`fused chat` driven through standard input (one message per line), greedy, on the default model.

usage: chat_test.py FUSED
  - the second turn runs only what the cache does not hold as a fresh run computes it: the first
    turn's prompt; its answer too where decoded rows equal prefilled ones (the scalar path; on the
    SIMD paths a linear layer's one-row arithmetic differs: fk_gemm_bf16_rows);
  - the second answer is the one the whole conversation gets from scratch (`fused serve` given the
    first turn's messages and answer), so what was reused is what a fresh prefill computes;
  - /reset forgets the conversation: the next turn runs from position 0 and answers as the first did;
  - a message longer than the context is refused with a message, and the chat goes on; the exit
    status is then 1 (a message was not answered);
  - CRLF input: each line is its message without the '\r', and /exit\r ends the chat; -n 0 answers
    with no tokens;
  - --context-shift drops the oldest turns instead;
  - Ctrl-C stops the reply being written, and the next message is answered."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time

FUSED = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def chat(lines, *args, rc=0, newline="\n"):
    r = subprocess.run([FUSED, "chat", "--temp", "0", "--threads", "1", *args], input=newline.join(lines) + newline, capture_output=True,
                       text=True, timeout=120)
    assert rc is None or r.returncode == rc, f"exit status {r.returncode}, not {rc}: {r.stderr}"
    if rc is None:  # 1 exactly when some message was refused
        check(r.returncode == (1 if "this turn needs" in r.stderr else 0), f"exit status {r.returncode}: {r.stderr[-400:]}")
    turns = [tuple(int(x) for x in m.groups())
             for m in re.finditer(r"turn \d+: prefill (\d+) tokens \((\d+) reused from the cache\).*generated (\d+) tokens.*context (\d+) of",
                                  r.stderr)]
    return r.stdout.split("\n")[:-1], turns, r.stderr


first, second = "In the beginning", "And what was made on the second day?"
answers, turns, err = chat([first, second], "-n", "10")
check(len(answers) == 2 and len(turns) == 2, f"two answers, two turn lines: {answers} {err}")
(p1, r1, g1, c1), (p2, r2, g2, c2) = turns
check(r1 == 0 and g1 == 10, f"turn 1 runs from scratch: {turns[0]}")
# The cache holds turn 1's prompt and all its answer but the last token (sampled, not yet run); the
# answer's rows are kept only where the kernels decode a row as they prefill it.
kernels = re.search(r"kernels here: (\w+)", subprocess.run([FUSED, "--version"], capture_output=True, text=True).stdout).group(1)
kept = p1 + g1 - 1 if kernels == "scalar" else p1
check(r2 == kept, f"turn 2 reuses turn 1 from the cache ({kernels} kernels): {turns[1]} after {turns[0]}")
check(r2 + p2 > p1 + g1 - 1 + 8 and c2 == r2 + p2 + g2 - 1, f"turn 2 runs the rest: {turns}")

# The same conversation from scratch, through the server: the second answer must be the same.
p = subprocess.Popen([FUSED, "serve", "--port", "0", "--threads", "1"], stderr=subprocess.PIPE, text=True)
port = None
deadline = time.time() + 60
while time.time() < deadline and port is None:
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", p.stderr.readline())
    port = int(m.group(1)) if m else None
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
c.request("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": first}, {"role": "assistant", "content": answers[0]},
                                                                   {"role": "user", "content": second}], "temperature": 0, "max_tokens": 10}))
fresh = json.loads(c.getresponse().read())["choices"][0]["message"]["content"]
p.terminate()
p.wait(30)
check(fresh == answers[1], f"the second answer from the cache {answers[1]!r} equals a fresh prefill's {fresh!r}")

answers, turns, err = chat([first, second, "/reset", first], "-n", "10")
check(len(answers) == 3 and answers[2] == answers[0] and turns[2][1] == 0, f"/reset starts again: {answers} {turns}")

# Lines of spaces and tabs ask nothing: no turn runs for them.
answers, turns, err = chat(["   ", "\t", first, " \t "], "-n", "2")
check(len(answers) == 1 and len(turns) == 1 and turns[0][1] == 0, f"blank lines ask nothing: {answers} {turns}")

long = " ".join(["and the earth"] * 200)
answers, turns, err = chat([long, first], "-n", "4", rc=1)
check("the context holds 512" in err and len(turns) == 1, f"an over-long message is refused and the chat goes on: {err}")
check("fused chat: error: 1 message(s) could not be answered" in err, f"the refusal is the exit status's reason: {err}")

crlf, crlf_turns, err = chat([first, "/exit", second], "-n", "10", newline="\r\n")
check(len(crlf_turns) == 1, f"/exit\\r ends the chat: {err}")
plain, plain_turns, _ = chat([first], "-n", "10")
check(crlf_turns[:1] == plain_turns and crlf[:1] == plain, f"a CRLF line is the same message as an LF one: {crlf_turns} {plain_turns}")
none, none_turns, err = chat([first], "-n", "0")
check(len(none_turns) == 1 and none_turns[0][2] == 0 and none == [""], f"-n 0 generates nothing: {none} {err}")

# The default model's checkpoint at run time, in a context of 160: replies of up to 100 tokens fill it
# mid-reply, with two thirds of the decoding the static model's 512 would take.
small = ["-m", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "models", "kjv-qwen2-4m"), "--ctx", "160"]
answers, turns, err = chat([first, second, "And the third?", "And the fourth?"], "-n", "100", *small, "--context-shift")
check(len(turns) == 4 and "context shifted" in err, f"--context-shift keeps the chat going: {err[-600:]}")
check(all(t[3] <= 160 for t in turns), f"never past the context: {turns}")

answers, turns, err = chat([first, second, "And the third?", "And the fourth?"], "-n", "100", *small, rc=None)
check("the context is full" in err, f"without --context-shift a full context is said: {err[-400:]}")

# Ctrl-C stops the reply being written, not the program: the next message is answered.
for attempt in range(10):
    p = subprocess.Popen([FUSED, "chat", "--threads", "1", "--seed", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(b"In the beginning\n")
    p.stdin.flush()
    p.stdout.read(1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(b"And God said\n", timeout=120)
    err = err.decode()
    turn_lines = [l for l in err.splitlines() if re.search(r"turn \d+:", l)]
    if len(turn_lines) == 2 and "interrupted" not in turn_lines[0]:
        continue  # the reply ended before the signal came: try again
    check(p.returncode == 0 and len(turn_lines) == 2 and "interrupted" in turn_lines[0] and "interrupted" not in turn_lines[1],
          f"Ctrl-C stops a reply and the chat goes on: rc {p.returncode}, {err[-600:]}")
    break
else:
    check(False, "every reply ended before SIGINT arrived")

if failures:
    sys.exit(f"{len(failures)} failed")
print("chat: all checks passed")
