#!/usr/bin/env python3
"""Drives `reagent serve` with the official OpenAI Python client (scripts/openai_venv.sh) and
prints what it observed as one JSON line, for reagent/tests/suite/serve.rs to check:

  python scripts/openai_client.py BASE_URL API_KEY

Every request goes through `client.chat.completions.create`, as a user's own tool would send it.
Observations (keys of the JSON):
  greedy            two greedy answers to the same question (text, finish_reason, usage)
  sampled           n = 8 at temperature 0.9 with seed 11, twice, and once with seed 12
  cut               max_tokens = 5 at temperature 1: finish_reason and completion tokens
  stop              a greedy count cut by stop=[", 4"]: text, finish_reason
  logprobs          greedy with logprobs and top_logprobs = 3: per token (token, logprob, tops)
  streamed          the greedy question streamed: pieces, finish_reason, usage chunk
  refused           status, param and message of requests the server must refuse by name
"""
import json
import sys

import openai


def main():
    base, key = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base + "/v1", api_key=key, timeout=300, max_retries=0)
    chat = client.chat.completions.create
    question = [{"role": "user", "content": "What is 17 + 25? Answer with just the number."}]
    story = [{"role": "user", "content": "Write a short story about a robot who learns to paint."}]
    out = {}

    def summary(r, i=0):
        c = r.choices[i]
        return {"text": c.message.content, "finish_reason": c.finish_reason,
                "completion_tokens": r.usage.completion_tokens, "prompt_tokens": r.usage.prompt_tokens}

    out["greedy"] = [summary(chat(model="m", messages=question, temperature=0, max_tokens=48)) for _ in range(2)]

    def texts(seed):
        r = chat(model="m", messages=story, temperature=0.9, n=8, max_tokens=16, seed=seed)
        return [c.message.content for c in r.choices]
    out["sampled"] = {"seed11": texts(11), "seed11_again": texts(11), "seed12": texts(12)}

    out["cut"] = summary(chat(model="m", messages=story, temperature=1.0, max_tokens=5, seed=3))

    count = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]
    out["stop"] = summary(chat(model="m", messages=count, temperature=0, max_tokens=40, stop=[", 4"]))

    r = chat(model="m", messages=question, temperature=0, max_tokens=48, logprobs=True, top_logprobs=3)
    out["logprobs"] = {
        "text": r.choices[0].message.content,
        "tokens": [{"token": t.token, "logprob": t.logprob, "bytes": t.bytes,
                    "tops": [[a.token, a.logprob] for a in t.top_logprobs]} for t in r.choices[0].logprobs.content],
    }

    pieces, finish, usage = [], None, None
    for chunk in chat(model="m", messages=question, temperature=0, max_tokens=48, stream=True,
                      stream_options={"include_usage": True}):
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
    out["streamed"] = {"pieces": pieces, "finish_reason": finish, "completion_tokens": usage}

    refused = []
    for extra in ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
                  {"presence_penalty": 0.5}, {"logit_bias": {"42": 5}},
                  {"extra_body": {"guided_json": {}}}):
        try:
            chat(model="m", messages=question, max_tokens=4, **extra)
            refused.append({"status": 200})
        except openai.BadRequestError as e:
            refused.append({"status": e.status_code, "param": e.body.get("param"), "message": e.body.get("message")})
    out["refused"] = refused
    print(json.dumps(out))


if __name__ == "__main__":
    main()
