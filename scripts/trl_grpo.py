"""TRL's GRPOTrainer on the single-turn reverse-a-word task, for `reagent bench trl`: the same
model directory, prompts, reward and hyper-parameters as our in-process GRPO
(learner/src/inproc/single_turn), timed step by step. Prints one JSON line.

    python scripts/trl_grpo.py --params '{"model_dir": ..., "prompts": [...], "targets": [...], ...}'

params: model_dir, prompts and targets (one per prompt, in the order used: warm-up steps first),
prompts_per_step, num_generations, warmup_steps, steps, max_new_tokens, temperature, lr, seed,
threads, and reward_cases ([completion, target, reward] as our reward computes them: checked
here before training, so both sides score alike). Runs in target/trl-venv
(scripts/trl_venv.sh); CPU only.
"""

import argparse
import json
import os
import sys
import tempfile
import time


def reward(completion, target):
    """learner/src/inproc/single_turn/task.rs `reward`: ½·letters in place + ½·target letters found."""
    letters = [c for c in completion if "a" <= c <= "z"]
    if not target:
        return 0.0
    in_place = sum(1 for t, l in zip(target, letters) if t == l)
    found = sum(1 for t in target if t in letters)
    return (in_place + found) / (2 * len(target))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", required=True)
    p = json.loads(ap.parse_args().params)
    for completion, target, want in p["reward_cases"]:
        got = reward(completion, target)
        if abs(got - want) > 1e-9:
            sys.exit(f"reward parity: {completion!r} vs {target!r}: python {got}, rust {want}")

    import torch

    torch.set_num_threads(p["threads"])
    import datasets
    import transformers
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    tokenizer = AutoTokenizer.from_pretrained(p["model_dir"])
    model = AutoModelForCausalLM.from_pretrained(p["model_dir"], dtype=torch.float32)

    # Time inside generate: wrap the model's own method (TRL calls it on the unwrapped model).
    generate_seconds = []
    inner_generate = model.generate

    def timed_generate(*args, **kwargs):
        t0 = time.perf_counter()
        out = inner_generate(*args, **kwargs)
        generate_seconds.append(time.perf_counter() - t0)
        return out

    model.generate = timed_generate

    tokens_per_call = []

    def reverse_reward(prompts, completions, completion_ids, target, **_):
        tokens_per_call.append(sum(len(ids) for ids in completion_ids))
        return [reward(c, t) for c, t in zip(completions, target)]

    step_ends = []

    class StepClock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            step_ends.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kwargs):
            step_ends.append(time.perf_counter())

    total_steps = p["warmup_steps"] + p["steps"]
    per_step = p["prompts_per_step"] * p["num_generations"]
    data = datasets.Dataset.from_dict({"prompt": p["prompts"], "target": p["targets"]})
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            use_cpu=True,
            bf16=False,
            per_device_train_batch_size=per_step,
            num_generations=p["num_generations"],
            max_completion_length=p["max_new_tokens"],
            temperature=p["temperature"],
            top_p=1.0,
            learning_rate=p["lr"],
            lr_scheduler_type="constant",
            warmup_steps=0,
            weight_decay=0.0,
            max_steps=total_steps,
            shuffle_dataset=False,
            seed=p["seed"],
            report_to="none",
            save_strategy="no",
            logging_steps=1_000_000,
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reverse_reward,
            args=config,
            train_dataset=data,
            processing_class=tokenizer,
            callbacks=[StepClock()],
        )
        # Where the time goes: _prepare_inputs (generation, decoding, rewards, advantages) inside
        # training_step (that, then the loss's forward and backward); the optimizer step follows.
        prepare_seconds, training_step_seconds = [], []
        inner_prepare, inner_training_step = trainer._prepare_inputs, trainer.training_step

        def timed_prepare(*args, **kwargs):
            t0 = time.perf_counter()
            out = inner_prepare(*args, **kwargs)
            prepare_seconds.append(time.perf_counter() - t0)
            return out

        def timed_training_step(*args, **kwargs):
            t0 = time.perf_counter()
            out = inner_training_step(*args, **kwargs)
            training_step_seconds.append(time.perf_counter() - t0)
            return out

        trainer._prepare_inputs, trainer.training_step = timed_prepare, timed_training_step
        trainer.train()

    if len(step_ends) != total_steps + 1 or len(tokens_per_call) != total_steps:
        sys.exit(f"expected {total_steps} steps, timed {len(step_ends) - 1} and scored {len(tokens_per_call)}")
    steps = [
        {
            "seconds": step_ends[i + 1] - step_ends[i],
            "completion_tokens": tokens_per_call[i],
            "generate_seconds": generate_seconds[i],
            "prepare_seconds": prepare_seconds[i],
            "training_step_seconds": training_step_seconds[i],
        }
        for i in range(total_steps)
    ]
    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__}
    print(json.dumps({"steps": steps, "versions": versions, "reward_cases_checked": len(p["reward_cases"])}))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
