#!/usr/bin/env python3
"""An example environment server for Reagent's HTTP environment protocol (docs/env-http.md,
docs/env-http.openapi.yaml), in Python with the standard library only.

The task: unit conversion with one tool. A task asks for one quantity (difficulty 1) or the sum
of two or three quantities (difficulty 2, 3) in a target unit; the agent calls
<tool>convert(VALUE, FROM, TO)</tool> and ends with <answer>NUMBER</answer>. Reward 1 for an
answer within 0.1 % of the truth, else 0. Tasks are deterministic given (seed, difficulty).

    python3 examples/http_env/server.py --listen 127.0.0.1:8765
    REAGENT_ENV_TOKEN=... python3 examples/http_env/server.py --listen 0.0.0.0:8765

Every request must carry "Authorization: Bearer <token>" when the variable named by
--token-env (REAGENT_ENV_TOKEN) is set; off loopback the server refuses to start without one.
--no-verify serves no /v1/verify (the reference judge then refuses to start; see the docs).
"""

import argparse
import hmac
import json
import os
import random
import re
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address

PROTOCOL = "reagent-env/1"
MAX_BODY = 1 << 20
MAX_SESSIONS = 4096
IDLE_S = 600
MAX_TURNS = 32

# Factors to a base unit, per dimension.
UNITS = {
    "length": {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048, "mi": 1609.344},
    "mass": {"g": 0.001, "kg": 1.0, "oz": 0.028349523125, "lb": 0.45359237},
    "time": {"s": 1.0, "min": 60.0, "h": 3600.0},
}
DIMENSION = {u: d for d, table in UNITS.items() for u in table}

SYSTEM = (
    "You convert units. One tool: <tool>convert(VALUE, FROM, TO)</tool> converts VALUE from unit FROM "
    "to unit TO (units: " + ", ".join(DIMENSION) + "). Write exactly one action per message: a tool "
    "call, or the final answer as <answer>NUMBER</answer> (a number in the unit asked for)."
)

TOOL = re.compile(r"<tool>\s*([a-z_]+)\((.*?)\)\s*</tool>", re.S)
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def fmt(x):
    return "%.10g" % x


def make_task(seed, difficulty):
    """The task of (seed, difficulty): quantities, the target unit, the question, the truth."""
    rng = random.Random("%d:%d" % (seed, difficulty))
    dim = rng.choice(sorted(UNITS))
    units = sorted(UNITS[dim])
    target = rng.choice(units)
    parts = []
    for _ in range(difficulty):
        unit = rng.choice([u for u in units if u != target])
        parts.append((round(rng.uniform(1, 100), rng.choice([0, 1, 2])), unit))
    truth = sum(v * UNITS[dim][u] for v, u in parts) / UNITS[dim][target]
    said = " plus ".join("%s %s" % (fmt(v), u) for v, u in parts)
    question = "How much is %s, in %s?" % (said, target) if difficulty > 1 else "Convert %s to %s." % (said, target)
    return {"parts": parts, "target": target, "truth": truth, "question": question}


def convert(value, src, dst):
    if src not in DIMENSION or dst not in DIMENSION:
        raise ValueError("unknown unit; the units are " + ", ".join(DIMENSION))
    if DIMENSION[src] != DIMENSION[dst]:
        raise ValueError("%s and %s measure different things" % (src, dst))
    return value * UNITS[DIMENSION[src]][src] / UNITS[DIMENSION[dst]][dst]


def parse(message):
    """("tool", name, args) | ("answer", text) | ("format", why)."""
    tools, answers = TOOL.findall(message), ANSWER.findall(message)
    if len(tools) + len(answers) != 1:
        return ("format", "write exactly one action: one <tool>convert(VALUE, FROM, TO)</tool> or one <answer>")
    if answers:
        return ("answer", answers[0].strip())
    name, raw = tools[0]
    return ("tool", name, [a.strip().strip("\"'") for a in raw.split(",")])


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def correct(task, text):
    x = number(text)
    return x is not None and abs(x - task["truth"]) <= 1e-3 * max(1.0, abs(task["truth"]))


def step(task, state, message):
    """One message: the observation, as the protocol's step reply."""
    state["turns"] += 1
    action = parse(message)
    if action[0] == "format":
        return {"text": action[1], "from": "env", "flaw": "format error"}
    if action[0] == "answer":
        ok = correct(task, action[1])
        summary = "correct" if ok else "wrong: the answer is not within 0.1 % of the truth"
        return {"text": summary, "from": "env", "end": {"reward": 1.0 if ok else 0.0, "success": ok, "summary": summary}}
    _, name, args = action
    if name != "convert" or len(args) != 3 or number(args[0]) is None:
        return {"text": "the one tool is convert(VALUE, FROM, TO)", "from": "env", "flaw": "wrong tool or arguments"}
    try:
        value = convert(number(args[0]), args[1], args[2])
    except ValueError as e:
        return {"text": str(e), "from": "tool", "flaw": "wrong arguments"}
    state["results"].append(value)
    obs = {"text": "%s %s = %s %s" % (args[0], args[1], fmt(value), args[2]), "from": "tool"}
    if state["turns"] >= MAX_TURNS:
        obs["end"] = {"reward": 0.0, "success": False, "summary": "turn limit reached without an answer"}
    return obs


def verify(task, messages):
    """Step-verifier findings: replays the messages and names each flaw by message index."""
    findings, seen, results, answered = [], set(), [], False
    needed = {(fmt(v), u, task["target"]) for v, u in task["parts"]}
    for i, message in enumerate(messages):
        action = parse(message)
        if action[0] == "format":
            findings.append({"step": i, "kind": "format_error", "detail": action[1]})
        elif action[0] == "answer":
            answered = True
            if not correct(task, action[1]):
                findings.append({"step": i, "kind": "wrong_answer", "detail": "the truth is %s" % fmt(task["truth"])})
            elif not results:
                findings.append({"step": i, "kind": "unsupported_answer", "detail": "no conversion was made"})
            break
        else:
            _, name, args = action
            call = tuple(args)
            if name != "convert":
                findings.append({"step": i, "kind": "wrong_tool", "detail": "no tool %r" % name})
            elif call in seen:
                findings.append({"step": i, "kind": "redundant_call", "detail": "repeats an earlier call"})
            elif len(args) != 3 or number(args[0]) is None or (fmt(number(args[0])), args[1], args[2]) not in needed:
                findings.append({"step": i, "kind": "wrong_arguments", "detail": "not a conversion the task needs"})
            else:
                results.append(call)
            seen.add(call)
    if not answered:
        findings.append({"step": len(messages), "kind": "gave_up_early", "detail": "no final answer"})
    return findings


def reference(task):
    calls = ["<tool>convert(%s, %s, %s)</tool>" % (fmt(v), u, task["target"]) for v, u in task["parts"]]
    return calls + ["<answer>%s</answer>" % fmt(task["truth"])]


class Sessions:
    """Open sessions, bounded in number, dropped when idle for IDLE_S."""

    def __init__(self):
        self.lock = threading.Lock()
        self.open = {}

    def add(self, task):
        with self.lock:
            now = time.monotonic()
            for sid in [s for s, v in self.open.items() if now - v["seen"] > IDLE_S]:
                del self.open[sid]
            if len(self.open) >= MAX_SESSIONS:
                return None
            sid = secrets.token_hex(16)
            self.open[sid] = {"task": task, "turns": 0, "results": [], "over": False, "seen": now}
            return sid

    def get(self, sid):
        with self.lock:
            state = self.open.get(sid)
            if state is not None:
                state["seen"] = time.monotonic()
            return state

    def close(self, sid):
        with self.lock:
            return self.open.pop(sid, None) is not None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "reagent-example-env/1"

    def log_message(self, fmt_, *args):
        if self.server.verbose:
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt_ % args))

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        token = self.server.token
        if token is None:
            return True
        presented = self.headers.get("Authorization", "")
        return hmac.compare_digest(presented.encode(), ("Bearer " + token).encode())

    def do_GET(self):
        if not self.authorized():
            return self.reply(401, {"error": "missing or wrong bearer token"})
        if self.path != "/v1/info":
            return self.reply(404, {"error": "no such path"})
        info = {"protocol": PROTOCOL, "name": "units", "verify": self.server.serve_verify, "reference": True}
        self.reply(200, info)

    def do_POST(self):
        if not self.authorized():
            return self.reply(401, {"error": "missing or wrong bearer token"})
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            return self.reply(413, {"error": "body over %d bytes" % MAX_BODY})
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as e:
            return self.reply(400, {"error": "not JSON: %s" % e})
        route = {
            "/v1/open": self.open_,
            "/v1/step": self.step_,
            "/v1/close": self.close_,
            "/v1/reference": self.reference_,
        }
        if self.server.serve_verify:
            route["/v1/verify"] = self.verify_
        handler = route.get(self.path)
        if handler is None:
            return self.reply(404, {"error": "no such path"})
        try:
            status, out = handler(body)
        except (KeyError, TypeError, ValueError) as e:
            status, out = 400, {"error": "bad request: %r" % e}
        self.reply(status, out)

    def task(self, body):
        t = body["task"]
        seed, difficulty = int(t["seed"]), int(t["difficulty"])
        if not 1 <= difficulty <= 3:
            raise ValueError("difficulty %d is not in 1..=3" % difficulty)
        return make_task(seed, difficulty)

    def open_(self, body):
        task = self.task(body)
        sid = self.server.sessions.add(task)
        if sid is None:
            return 503, {"error": "full: %d sessions open" % MAX_SESSIONS}
        return 200, {"session": sid, "system": SYSTEM, "user": task["question"]}

    def step_(self, body):
        state = self.server.sessions.get(str(body["session"]))
        if state is None:
            return 404, {"error": "no such session"}
        if state["over"]:
            return 200, {"text": "the episode is over", "from": "env", "flaw": "episode over"}
        obs = step(state["task"], state, str(body["message"]))
        state["over"] = "end" in obs
        return 200, obs

    def close_(self, body):
        return 200, {"closed": self.server.sessions.close(str(body["session"]))}

    def verify_(self, body):
        messages = [str(m) for m in body["messages"]]
        return 200, {"findings": verify(self.task(body), messages)}

    def reference_(self, body):
        return 200, {"messages": reference(self.task(body))}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", default="127.0.0.1:8765", help="host:port (port 0 picks a free one)")
    p.add_argument("--token-env", default="REAGENT_ENV_TOKEN", help="the variable holding the shared token")
    p.add_argument("--no-verify", action="store_true", help="serve no /v1/verify")
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    a = p.parse_args()
    host, _, port = a.listen.rpartition(":")
    host = host.strip("[]")
    token = os.environ.get(a.token_env, "").strip() or None
    loopback = host == "localhost" or ip_address(host).is_loopback
    if token is None and not loopback:
        sys.exit("refusing to listen on %s without a token: set %s" % (a.listen, a.token_env))
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    server.token, server.serve_verify, server.verbose = token, not a.no_verify, a.verbose
    server.sessions = Sessions()
    bound = server.server_address
    print("env server listening on http://%s:%d" % (bound[0], bound[1]), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
