#!/usr/bin/env python3
"""`fused serve` end to end, over HTTP on a loopback port (python3's http.client, no other client).

usage: serve_test.py FUSED
On the default model, greedy:
  - a chat completion, streamed and not, equals `fused run --chat --temp 0` for the same message;
  - a completion equals `fused run --temp 0`;
  - 4 concurrent requests are each answered as when sent alone;
  - bad requests get a 4xx with an OpenAI-style error body while the server stays up;
  - the API key is enforced on /v1/ (not on /health);
  - past the sessions and the queue, 503; a client that goes away frees its session;
  - SIGTERM lets the running request finish, then the server exits 0; meanwhile /health is 503
    "stopping" and a new request gets 503 "the server is shutting down".
Every wait is bounded."""
import http.client
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time

FUSED = sys.argv[1]
KEY = "sesame"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def start(*args):
    p = subprocess.Popen([FUSED, "serve", "--port", "0", "--threads", "1", *args], stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = time.time() + 60
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            log = []
            threading.Thread(target=lambda: log.extend(p.stderr), daemon=True).start()
            return p, int(m.group(1)), lines, log
    p.kill()
    sys.exit("the server did not start: " + "".join(lines))


def request(port, method, path, body=None, key=KEY, raw=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=headers)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text


def events(text):
    out = []
    for line in text.split("\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def fused_run(*args):
    r = subprocess.run([FUSED, "run", "--threads", "1", "--temp", "0", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout[:-1]  # run ends its text with a newline


MESSAGE = "In the beginning"
chat_want = fused_run("--chat", "-p", MESSAGE, "-n", "12")
text_want = fused_run("-p", "And God said", "-n", "10")

p, port, startup, log = start("--parallel", "2", "--queue", "8", "--api-key", KEY)
check(any("2 sessions x 512 positions" in l and "in one region" in l for l in startup), "the start line gives the sessions and their memory")

chat = {"messages": [{"role": "user", "content": MESSAGE}], "temperature": 0, "max_tokens": 12}
status, text = request(port, "POST", "/v1/chat/completions", chat)
body = json.loads(text)
check(status == 200 and body["choices"][0]["message"]["content"] == chat_want, f"chat completion {status} {text!r} != {chat_want!r}")
check(body["object"] == "chat.completion" and body["usage"]["completion_tokens"] == 12 and body["usage"]["total_tokens"] ==
      body["usage"]["prompt_tokens"] + 12, f"chat usage {text}")
check(body["choices"][0]["finish_reason"] == "length", "max_tokens ends with finish_reason length")

status, text = request(port, "POST", "/v1/chat/completions", dict(chat, stream=True, stream_options={"include_usage": True}))
ev = events(text)
streamed = "".join(e["choices"][0]["delta"].get("content", "") for e in ev if e["choices"])
check(status == 200 and streamed == chat_want, f"streamed chat {streamed!r} != {chat_want!r}")
check(ev and ev[0]["choices"][0]["delta"].get("role") == "assistant", "the first chunk names the role")
check(ev[-1]["choices"] == [] and ev[-1]["usage"]["completion_tokens"] == 12, "include_usage: a last chunk with the usage")
check(text.rstrip().endswith("data: [DONE]"), "the stream ends with [DONE]")

status, text = request(port, "POST", "/v1/completions", {"prompt": "And God said", "temperature": 0, "max_tokens": 10})
check(status == 200 and json.loads(text)["choices"][0]["text"] == text_want, f"completion {text!r} != {text_want!r}")

# A stop string ends the text before it, and is not part of it.
cut = text_want[3:9]
status, text = request(port, "POST", "/v1/completions", {"prompt": "And God said", "temperature": 0, "max_tokens": 10, "stop": [cut]})
c = json.loads(text)["choices"][0]
check(c["text"] == text_want[:text_want.index(cut)] and c["finish_reason"] == "stop", f"stop string: {text}")

status, text = request(port, "POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 0})
c = json.loads(text)
check(status == 200 and c["choices"][0]["text"] == "" and c["usage"]["completion_tokens"] == 0, f"max_tokens 0: {text}")

# Four at once, each as when alone.
prompts = ["In the beginning", "And God said", "The LORD is my shepherd", "Blessed are the"]
alone = [json.loads(request(port, "POST", "/v1/completions", {"prompt": q, "temperature": 0, "max_tokens": 16})[1])["choices"][0]["text"]
         for q in prompts]
together = [None] * 4


def one(i):
    s, t = request(port, "POST", "/v1/completions", {"prompt": prompts[i], "temperature": 0, "max_tokens": 16, "stream": i % 2 == 1})
    together[i] = (s, "".join(e["choices"][0]["text"] for e in events(t)) if i % 2 == 1 else json.loads(t)["choices"][0]["text"])


threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
[t.start() for t in threads]
[t.join(120) for t in threads]
check(together == [(200, a) for a in alone], f"concurrent answers {together} != {alone}")

# Bad requests: a 4xx with an error body naming what is wrong; the server stays up.
bad = [
    ("malformed JSON", b'{"messages": [', 400, "not valid JSON"),
    ("not an object", b'[1, 2]', 400, "must be a JSON object"),
    ("no messages", json.dumps({"model": "x"}).encode(), 400, "messages is required"),
    ("wrong type", json.dumps({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}).encode(), 400, "temperature must be a number in [0, "),
    ("out of range", json.dumps({"messages": [{"role": "user", "content": "hi"}], "top_p": 3}).encode(), 400, "top_p must be a number in [0, 1], got 3"),
    # a seed is any integer fused run -s takes, [0, 2^64 - 1]: not below, not past (a double to the parser)
    ("negative seed", json.dumps({"messages": [{"role": "user", "content": "hi"}], "seed": -1}).encode(), 400,
     "seed must be an integer in [0, 18446744073709551615], got -1"),
    ("seed past 2^64 - 1", b'{"messages": [{"role": "user", "content": "hi"}], "seed": 18446744073709551616}', 400,
     "seed must be an integer in [0, 18446744073709551615], got 1.8446744073709552e+19"),
    ("negative top_k", json.dumps({"messages": [{"role": "user", "content": "hi"}], "top_k": -1}).encode(), 400, "top_k must be an integer in [0, "),
    ("bad role", json.dumps({"messages": [{"role": "wizard", "content": "hi"}]}).encode(), 400, "messages[0].role: 'wizard'"),
    ("bad content part", json.dumps({"messages": [{"role": "user", "content": [{"type": 7, "text": "hi"}]}]}).encode(), 400,
     "messages[0].content[0] must be"),
    ("n > 1", json.dumps({"messages": [{"role": "user", "content": "hi"}], "n": 2}).encode(), 400, "n must be 1"),
    ("empty stop", json.dumps({"messages": [{"role": "user", "content": "hi"}], "stop": [""]}).encode(), 400, "stop strings must not be empty"),
    ("too long", json.dumps({"messages": [{"role": "user", "content": "and the " * 400}]}).encode(), 400, "the context holds 512"),
    ("not UTF-8", b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400, "UTF-8"),
    ("huge body", b'{"prompt": "' + b"a" * (2 << 20) + b'"}', 413, "larger than the server's limit"),
    # a key twice is refused (last-wins would answer what a proxy that read the first did not check)
    ("key twice", b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "max_tokens": 9}', 400,
     'the request body has the key "max_tokens" twice in one object'),
    ("key twice, nested", b'{"messages": [{"role": "user", "role": "system", "content": "hi"}]}', 400, 'the key "role" twice'),
    ("deep nesting", b'{"messages": ' + b"[" * 100 + b"]" * 100 + b"}", 400, "nests deeper than 32 levels"),
    ("two limits", json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "max_completion_tokens": 7}).encode(), 400,
     "max_tokens (5) and max_completion_tokens (7) disagree: give one"),
    # fields that would change the answer: refused unless neutral, not ignored
    ("logit_bias", json.dumps({"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"50": 100}}).encode(), 400, "logit_bias is not supported"),
    ("tools", json.dumps({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}).encode(), 400, "tools are not supported"),
    ("response_format", json.dumps({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}}).encode(), 400,
     "response_format is not supported"),
    ("modalities", json.dumps({"messages": [{"role": "user", "content": "hi"}], "modalities": ["text", "audio"]}).encode(), 400,
     "modalities is not supported: only [\"text\"]"),
    ("web search", json.dumps({"messages": [{"role": "user", "content": "hi"}], "web_search_options": {}}).encode(), 400,
     "web_search_options is not supported"),
    ("logprobs 0", json.dumps({"messages": [{"role": "user", "content": "hi"}], "logprobs": 0}).encode(), 400, "logprobs is not supported"),
    ("stream_options unstreamed", json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": True}}).encode(), 400,
     "stream_options is only for a streamed answer"),
]
for what, raw, want_status, want_text in bad:
    try:
        status, text = request(port, "POST", "/v1/chat/completions", raw=raw)
    except (ConnectionError, http.client.HTTPException) as e:
        check(False, f"{what}: the connection failed ({e})")
        continue
    try:
        err = json.loads(text)["error"]
    except (ValueError, KeyError, TypeError):
        err = {"message": text}
    check(status == want_status and want_text in err.get("message", ""), f"{what}: {status} {text[:200]!r}")
status, text = request(port, "POST", "/v1/chat/completions", raw=json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 200}).encode())
check(status == 200, "after the bad requests the server still answers")
parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "In the "}, {"type": "text", "text": "beginning"}]}],
         "temperature": 0, "max_tokens": 12}
status, text = request(port, "POST", "/v1/chat/completions", parts)
check(status == 200 and json.loads(text)["choices"][0]["message"]["content"] == chat_want, f"text parts are one message: {text}")
status, text = request(port, "POST", "/v1/completions", {"prompt": "x" * 10, "max_tokens": 1})
check(status == 200, "completions still answer")
# Expect: 100-continue with a body over --max-body: 413 before the client sends it (it had said 100,
# read the 3 MB, then 413).
with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3000000\r\n"
              b"Expect: 100-continue\r\nAuthorization: Bearer " + KEY.encode() + b"\r\n\r\n")
    reply = b""
    while chunk := s.recv(4096):
        reply += chunk
check(reply.startswith(b"HTTP/1.1 413") and b"larger than the server's limit" in reply and reply.count(b"Connection: close") == 1,
      f"Expect: 100-continue over the limit: {reply[:300]!r}")
# A seed up to 2^64 - 1, as fused run -s takes it: the same sampled text.
seeded = subprocess.run([FUSED, "run", "--threads", "1", "--temp", "0.8", "-s", str(2**64 - 1), "-p", "And God said", "-n", "10"],
                        capture_output=True, text=True, timeout=120)
status, text = request(port, "POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 10, "temperature": 0.8, "seed": 2**64 - 1})
check(seeded.returncode == 0 and status == 200 and json.loads(text)["choices"][0]["text"] == seeded.stdout[:-1],
      f"seed 2^64 - 1: {status} {text[:200]!r} against fused run's {seeded.stdout!r}")
status, text = request(port, "GET", "/nowhere")
check(status == 404 and "no route" in text, f"unknown route: {status} {text}")

# Damaged bodies (seeded byte flips, insertions, cuts of a valid request): each answered 200 or
# 4xx with an error body, never a 5xx or a dropped connection.
import random
rng = random.Random(7)
base = json.dumps({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                   "max_tokens": 2, "temperature": 0.5, "top_k": 5, "stop": ["\n"], "stream": False}).encode()
for i in range(300):
    b = bytearray(base)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(b))
        op = rng.randrange(3)
        if op == 0:
            b[at] = rng.randrange(256)
        elif op == 1:
            b.insert(at, rng.choice(b'{}[]",:0123456789-eE.\\ntrufalsn\x00\xff'))
        else:
            del b[at:at + rng.randint(1, 8)]
    try:
        status, text = request(port, "POST", "/v1/chat/completions", raw=bytes(b))
    except (ConnectionError, http.client.HTTPException) as e:
        check(False, f"damaged body {bytes(b)!r}: the connection failed ({e})")
        break
    ok = status == 200 or (400 <= status < 500 and "error" in json.loads(text))
    check(ok, f"damaged body {bytes(b)!r}: {status} {text[:200]!r}")
    if not ok:
        break

# The API key.
status, text = request(port, "GET", "/v1/models", key=None)
check(status == 401 and json.loads(text)["error"]["code"] == "invalid_api_key", f"no key: {status} {text}")
status, text = request(port, "GET", "/v1/models", key="wrong")
check(status == 401, f"wrong key: {status}")
status, text = request(port, "GET", "/v1/models")
check(status == 200 and json.loads(text)["data"][0]["id"] == "kjv-qwen2-4m", f"models: {text}")
status, text = request(port, "GET", "/health", key=None)
check(status == 200 and json.loads(text)["status"] == "ok", f"health: {text}")
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
c.request("GET", "/v1/models", headers={"Authorization": "bearer " + KEY})  # the scheme is case-insensitive
r = c.getresponse()
check(r.status == 200, f"'bearer' in lower case: {r.status} {r.read()[:200]!r}")
c.close()
status, text = request(port, "GET", "/v1/completions")
check(status == 405 and "use POST" in json.loads(text)["error"]["message"], f"a known route, the wrong method: {status} {text}")

# A second server on the port in use fails, instead of sharing the connections with the first.
second = subprocess.Popen([FUSED, "serve", "--port", str(port), "--threads", "1"], stderr=subprocess.PIPE, text=True)
try:
    _, second_err = second.communicate(timeout=60)
except subprocess.TimeoutExpired:
    second.kill()
    _, second_err = second.communicate()
check(second.returncode == 1 and "cannot listen" in second_err, f"a second server on port {port}: rc {second.returncode} {second_err[-300:]}")

def exchange(port, data):
    """Sends bytes as they are; returns what came back up to the server's close, and whether it closed."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(data)
    answer = b""
    try:
        while chunk := s.recv(65536):
            answer += chunk
        closed = True
    except socket.timeout:
        closed = False
    s.close()
    return answer, closed


# The same fields asking for what fused does anyway are accepted.
status, text = request(port, "POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 2, "logit_bias": {}, "best_of": 1, "echo": False,
                                                         "tools": [], "tool_choice": "none", "response_format": {"type": "text"}, "logprobs": None})
check(status == 200, f"neutral values of the refused fields: {status} {text[:200]}")

# Two requests in one write (HTTP/1.1 pipelining): the first is answered with "Connection: close"
# and the connection closed, which tells the client the second was not read; neither waits for ever.
answer, closed = exchange(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                          KEY.encode() + b"\r\n\r\n")
check(closed and answer.startswith(b"HTTP/1.1 200") and b"\r\nConnection: close\r\n" in answer and answer.count(b"HTTP/1.1 ") == 1,
      f"pipelined requests: the first answered, then the connection closed: closed={closed} {answer[:300]!r}")
# A Content-Length that is not a count: the request's fault (400), not a body over the limit (413).
answer, closed = exchange(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                          b"\r\nContent-Length: -5\r\n\r\n")
check(closed and answer.startswith(b"HTTP/1.1 400") and b"the Content-Length header '-5' is not a number of bytes" in answer,
      f"Content-Length -5: {answer[:300]!r}")
answer, closed = exchange(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                          b"\r\nContent-Length: abc\r\n\r\n{}")
check(closed and answer.startswith(b"HTTP/1.1 400") and b"the Content-Length header 'abc' is not a number of bytes" in answer,
      f"Content-Length abc: {answer[:300]!r}")
# Two Content-Length headers: where the body ends is ambiguous (RFC 9112 6.3), refused, not the first one read.
answer, closed = exchange(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                          b"\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}")
check(closed and answer.startswith(b"HTTP/1.1 400") and b"the request has 2 Content-Length headers; send one" in answer,
      f"two Content-Length headers: {answer[:300]!r}")

# A POST with neither Content-Length nor chunked encoding: 411 at once (httplib would wait out its
# read timeout for a body whose end it cannot know).
started = time.time()
answer, closed = exchange(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() + b"\r\n\r\n")
check(closed and answer.startswith(b"HTTP/1.1 411") and b"a POST needs a Content-Length header" in answer and time.time() - started < 3,
      f"POST without Content-Length: {time.time() - started:.1f} s {answer[:300]!r}")
# A chunked body is held to --max-body too (httplib 0.11 holds only a Content-Length to it).
body = b'{"prompt": "' + b"a" * (2 << 20) + b'"}'
chunked = b"".join(b"%x\r\n" % len(body[i:i + 65536]) + body[i:i + 65536] + b"\r\n" for i in range(0, len(body), 65536)) + b"0\r\n\r\n"
answer, closed = exchange(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                          b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
check(answer.startswith(b"HTTP/1.1 413") and b"larger than the server's limit" in answer, f"chunked body over --max-body: {answer[:300]!r}")
small = json.dumps({"prompt": "And God said", "max_tokens": 2}).encode()
answer, closed = exchange(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                          b"\r\nTransfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(small) + small + b"\r\n0\r\n\r\n")
check(answer.startswith(b"HTTP/1.1 200") and b'"completion_tokens":2' in answer, f"a chunked body within the limit: {answer[:300]!r}")
# HTTP/1.0 has no chunked encoding (RFC 9112 7.1): the reply, streamed or not, is a body the closed
# connection ends (it came in chunks, their sizes inside the JSON for an HTTP/1.0 client).
for stream in (False, True):
    body = json.dumps({"prompt": "And God said", "max_tokens": 3, "stream": stream}).encode()
    answer, closed = exchange(port, b"POST /v1/completions HTTP/1.0\r\nAuthorization: Bearer " + KEY.encode() +
                              b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    head, _, payload = answer.partition(b"\r\n\r\n")
    whole = json.loads(payload) if not stream else [json.loads(e[6:]) for e in payload.decode().split("\n\n") if e.startswith("data: {")]
    check(closed and head.startswith(b"HTTP/1.1 200") and b"transfer-encoding" not in head.lower() and payload.endswith(b"}" if not stream else b"data: [DONE]\n\n")
          and (whole["usage"]["completion_tokens"] == 3 if not stream else len(whole) >= 2), f"HTTP/1.0, stream={stream}: {answer[:400]!r}")

# A client that goes away mid-stream: its request is cancelled and its session freed.
for attempt in range(5):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    body = json.dumps({"prompt": "And God said", "max_tokens": 500, "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() + b"\r\nContent-Type: application/json\r\n" +
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    s.recv(1)
    s.close()
    deadline = time.time() + 20
    while time.time() < deadline and not any("cancelled: the client went away" in l for l in log):
        time.sleep(0.05)
    if any("cancelled: the client went away" in l for l in log):
        break
check(any("cancelled: the client went away" in l for l in log), "a client that went away is cancelled: " + "".join(log[-5:]))
status, text = request(port, "GET", "/health")
check(status == 200 and json.loads(text)["busy"] == 0, f"its session is free: {text}")

# SIGTERM while a request runs: it is answered in full, then the server exits 0.
result = {}
t = threading.Thread(target=lambda: result.update(r=request(port, "POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 480,
                                                                                                 "temperature": 0})))
t.start()
deadline = time.time() + 20
while time.time() < deadline and not any(json.loads(request(port, "GET", "/health")[1])["busy"] for _ in [0]):
    time.sleep(0.002)
p.send_signal(signal.SIGTERM)
# While it drains: /health says so (503, for a load balancer) and a new request hears why it is refused.
draining = None
for _ in range(500):
    try:
        health = request(port, "GET", "/health")
        if health[0] == 503:
            draining = health + request(port, "POST", "/v1/completions", {"prompt": "And", "max_tokens": 1})
            break
    except OSError:
        break
    time.sleep(0.001)
check(draining is not None and json.loads(draining[1])["status"] == "stopping" and draining[2] == 503
      and json.loads(draining[3])["error"]["message"] == "the server is shutting down", f"while the server drains: {draining}")
t.join(60)
try:
    rc = p.wait(60)
except subprocess.TimeoutExpired:
    p.kill()
    rc = "hung"
check(rc == 0, f"SIGTERM: exit status {rc}")
status, text = result.get("r", (None, ""))
check(status == 200 and json.loads(text)["usage"]["completion_tokens"] > 0, f"the running request finished: {status} {text[:200]}")
check(any("stopped" in l for l in log), "the server said it stopped")

# Past the sessions and the queue: 503 (one session, no queue, eight requests at once). Its chat
# template is Mistral's, which renders a system message alone as no tokens: the client's error, a 400.
p, port, _, log = start("--parallel", "1", "--queue", "0", "--chat-template", "mistral")
status, text = request(port, "POST", "/v1/chat/completions", {"messages": [{"role": "system", "content": "x"}]}, key=None)
check(status == 400 and json.loads(text)["error"]["param"] == "messages", f"messages that render to no tokens: {status} {text}")
statuses = []


def long_one():
    s, t = request(port, "POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 500}, key=None)
    statuses.append((s, t))


threads = [threading.Thread(target=long_one) for _ in range(8)]
[t.start() for t in threads]
[t.join(120) for t in threads]
check(all(s in (200, 503) for s, _ in statuses) and any(s == 503 for s, _ in statuses) and any(s == 200 for s, _ in statuses),
      f"busy: {[s for s, _ in statuses]}")
check(all("busy" in json.loads(t)["error"]["message"] for s, t in statuses if s == 503), "503 says the server is busy")
# One request after another, each answer read in full first, never finds the one session busy: it is
# freed before its client hears the end (it was freed after, and 29 of 40 such requests got 503).
sequential = [request(port, "POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 2, "stream": k % 2 == 1}, key=None)[0]
              for k in range(30)]
check(sequential == [200] * 30, f"sequential requests on one session: {sequential}")
status, text = request(port, "GET", "/health")
check(status == 200 and json.loads(text)["busy"] == 0, f"idle after them: {text}")
p.send_signal(signal.SIGINT)
check(p.wait(60) == 0, "SIGINT: exit 0")

# A model that fails on the prompt (a NaN weight: logits not finite) answers 500, naming the weight,
# streamed or not, and the failure is logged; the server goes on serving.
import os  # noqa: E402
import shutil  # noqa: E402
import struct  # noqa: E402
import tempfile  # noqa: E402

model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "models", "kjv-qwen2-4m")
poisoned = tempfile.mkdtemp(prefix="fused_serve_nan_")
for f in os.listdir(model):
    shutil.copy(os.path.join(model, f), poisoned)
raw = bytearray(open(os.path.join(model, "model.safetensors"), "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
at = 8 + n + json.loads(raw[8:8 + n])["model.norm.weight"]["data_offsets"][0]
raw[at:at + 2] = b"\xc0\x7f"  # bf16 NaN
open(os.path.join(poisoned, "model.safetensors"), "wb").write(raw)
p, port, _, log = start("--parallel", "1", "-m", poisoned)
for stream in (False, True):
    status, text = request(port, "POST", "/v1/completions", {"prompt": "And God said", "max_tokens": 4, "stream": stream}, key=None)
    check(status == 500 and 'tensor "model.norm.weight" holds NaN' in json.loads(text)["error"]["message"] and json.loads(text)["error"]["type"] == "server_error",
          f"a NaN weight, stream={stream}: {status} {text[:300]}")
status, text = request(port, "GET", "/health")
check(status == 200 and json.loads(text)["busy"] == 0, f"still serving: {status} {text}")
p.send_signal(signal.SIGINT)
check(p.wait(60) == 0, "SIGINT: exit 0")
check(any("failed after 0 generated tokens" in line and "model.norm.weight" in line for line in log), "the failure is logged: " + "".join(log[-5:]))
shutil.rmtree(poisoned, ignore_errors=True)

if failures:
    sys.exit(f"{len(failures)} failed")
print("serve: all checks passed")
