"""One process of the world-size test (``test_updates.py``): a scripted run, 1 or 2 ranks (torchrun).

Trains the tiny model for 2 iterations of 2 tasks x 2 rollouts with 5-row mini-batches and a small
token budget, in the update layout of the optional second argument (default packed), with SGD (a plain
sum of gradients: no Adam normalisation to amplify float noise), and writes ``{out}/result.json`` from
rank 0: the logged losses and updates, the final parameters, and the metrics of a validation (each rank
plays its share of the eval episodes; the metrics are gathered).
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
from pathlib import Path

import torch

from tests.gaca_train.tiny_setup import scripted_trainer_class, tiny_config, tiny_model_and_tokenizer


def main(out: Path, layout: str = "packed") -> None:
    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    args = tiny_config(
        out,
        max_steps=2,
        mini_batch_rows=5,
        micro_batch_tokens=400,
        optim="sgd",
        learning_rate=0.5,
        max_grad_norm=0.0,
        eval_splits=["valid"],
        eval_rollouts_per_task=3,
        update_layout=layout,
    )
    trainer = scripted_trainer_class()(model=model, args=args, processing_class=tokenizer)
    trainer.train()
    validation = trainer.evaluate()
    trainer.close_envs()
    if trainer.accelerator.is_main_process:
        logs = [log for log in trainer.state.log_history if "loss" in log]
        result = {
            "world_size": trainer.accelerator.num_processes,
            "losses": [log["loss"] for log in logs],
            "updates": [log["train/updates"] for log in logs],
            "rows": [log["train/rows"] for log in logs],
            "params": torch.cat([p.detach().flatten() for p in model.parameters()]).tolist(),
            "validation": validation,
        }
        (out / "result.json").write_text(json.dumps(result))
    if torch.distributed.is_initialized():  # exiting with the process group alive can abort a rank at teardown
        trainer.accelerator.wait_for_everyone()
        torch.distributed.destroy_process_group()
    # Every rank has written what it owes; leave without running destructors. A rank once hung for 240 s
    # after this point, in C++ teardown (the stack showed no Python frame below the module), in a CI run
    # on 2 loaded cores.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    # A rank that hangs (a rendezvous or a collective that never completes) prints every thread's stack
    # and exits, well before the test's own time limit, so the failure says where it stopped.
    faulthandler.dump_traceback_later(240, exit=True)
    main(Path(sys.argv[1]), *sys.argv[2:])
