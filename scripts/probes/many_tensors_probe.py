"""Start-up's per-tensor costs: a checkpoint with Qwen3-30B-A3B FP8's layout (48 layers x 128 experts, each
projection with its weight_scale_inv: 37,491 tensors) but tiny dimensions (0.6 GB), so that what start-up spends
per tensor, not per byte, is what a run shows. `--weights nvfp4`: the NVFP4 layout (each expert projection with
weight_scale, weight_scale_2 and input_scale: 74,163 tensors).

    PYTHONPATH=src python3 scripts/probes/many_tensors_probe.py write /tmp/q3many [--weights fp8|nvfp4]
    PYTHONPATH=src python3 scripts/probes/many_tensors_probe.py time /tmp/q3many [--device cpu] [--runs 3]
    python3 -m quickmoe bench coldstart /tmp/q3many -n 3 --device cuda      # the same, with the serving path

`time` builds the LLM in fresh processes and prints the config, build, load and process phases of each.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

OVERRIDES = dict(hidden_size=256, moe_intermediate_size=128, intermediate_size=256, num_attention_heads=2,
                 num_key_value_heads=1, vocab_size=2048, eos_token_id=2046, pad_token_id=2047)

_ONE_RUN = """
import sys
from quickmoe.llm import LLM
from quickmoe.startup.report import StartupReport
report = StartupReport()
LLM(sys.argv[1], device=sys.argv[2], max_model_len=256, startup_report=report, cuda_graphs="off")
print("  ".join(f"{k} {report.phases[k]:.3f} s" for k in ("config", "build", "load", "process")))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="write the checkpoint")
    write.add_argument("out")
    write.add_argument("--weights", choices=("fp8", "nvfp4"), default="fp8")
    timing = sub.add_parser("time", help="time the start-up phases in fresh processes")
    timing.add_argument("model")
    timing.add_argument("--device", default="cpu")
    timing.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.command == "write":
        from quickmoe.checkpoint.synth import write_checkpoint

        path = write_checkpoint(args.out, preset="qwen3-30b-a3b", experts_dtype=args.weights, overwrite=True,
                                progress=False, overrides=OVERRIDES)
        print(path)
        return
    for _ in range(args.runs):
        subprocess.run([sys.executable, "-c", _ONE_RUN, args.model, args.device], check=True)


if __name__ == "__main__":
    main()
