"""The HTTP frontend alone under streaming load: how many tokens a stream chunk carries and where the frontend's
CPU goes, with the engine replaced by a core that emits a step of outputs every `--step-ms`.

At concurrency 256 on the H200 (`bench serve` 1000 -> 256, gpt-oss-20b) the engine's decode steps took 10.9 ms
and the median gap between a stream's chunks was 0.04-60 ms in identical runs: where the frontend process
(server/engine_process.py) falls behind, each stream's queue merges what piled up into one chunk
(server/async_engine.py), and one read of the client can bring several chunks. This
runs the real app (`create_app` over a `CoreClient`, uvicorn, the server's own options) in this process with a
`StepCore`: a thread that, every `--step-ms`, publishes one output per running request (one token, its text),
as the engine process's pipe thread does, finishing each after its max_tokens. A client process
(`quickmoe bench serve`) streams `--num-prompts` requests at `--concurrency`. Reported: the step rate achieved,
the client's table (ITL = the gap between chunks; TPOT = a request's time per token after the first), and with
`--profile` the frontend's functions by own time (cProfile over the whole run on the event loop's thread; from
Python 3.12 on, cProfile sees the step thread too).

    python3 scripts/probes/frontend_probe.py /tmp/tiny --concurrency 256 --num-prompts 768 --output-len 256
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from quickmoe.engine.outputs import StepOutput
from quickmoe.engine.request_checks import RequestChecker
from quickmoe.server.core_client import CoreClient
from quickmoe.server.engine_core import CoreBatch
from quickmoe.server.metrics import EngineSnapshot


class StepCore(CoreClient):
    """An engine stand-in: each step gives every running request one token (id 1000 + its count, text " t")."""

    def __init__(self, model_dir: Path, step_s: float, max_num_seqs: int) -> None:
        from quickmoe.config import ModelConfig
        from quickmoe.tokenizer import load_tokenizer

        config = ModelConfig.from_dir(model_dir)
        self.tokenizer = load_tokenizer(model_dir)
        self.vocab_size, self.max_model_len, self.max_num_seqs = config.vocab_size, 4096, max_num_seqs
        self.model_dir, self.startup_report = model_dir, None
        self.checker = RequestChecker(self.tokenizer, self.vocab_size, self.max_model_len)
        self.step_s = step_s
        self._lock = threading.Lock()
        self._running: dict[str, list] = {}  # id -> [prompt tokens, max_tokens, produced]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.steps = 0
        self.late_s = 0.0  # how far the step thread fell behind its schedule in all

    def start(self, publish) -> None:
        self._thread = threading.Thread(target=self._loop, args=(publish,), daemon=True, name="step-core")
        self._thread.start()

    def _loop(self, publish) -> None:
        next_step = time.monotonic()
        while not self._stop.is_set():
            next_step += self.step_s
            with self._lock:
                items = list(self._running.items())
            outputs = []
            for request_id, state in items:
                state[2] += 1
                done = state[2] >= state[1]
                outputs.append(StepOutput(request_id, [1000 + state[2]], " t", None, done, "length" if done else None,
                                          None, state[0], state[2], 0, None, None))
                if done:
                    with self._lock:
                        self._running.pop(request_id, None)
            publish(CoreBatch(outputs, time.monotonic(), EngineSnapshot(num_running=len(items))))
            self.steps += 1
            delay = next_step - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                self.late_s -= delay
                next_step = time.monotonic()

    def add_request(self, request_id, prompt_ids, params) -> None:
        params = self.checker.params(request_id, params)
        with self._lock:
            self._running[request_id] = [len(prompt_ids), params.max_tokens, 0]

    def abort(self, request_id, index=None) -> None:
        with self._lock:
            self._running.pop(request_id, None)

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return self._thread is None or not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="a checkpoint directory (its tokenizer and config)")
    parser.add_argument("--step-ms", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--num-prompts", type=int, default=768)
    parser.add_argument("--input-len", type=int, default=100)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    import uvicorn

    from quickmoe.server.app import create_app
    from quickmoe.server.config import ServerConfig
    from quickmoe.server.serve import uvicorn_config

    core = StepCore(args.model, args.step_ms / 1e3, max_num_seqs=max(args.concurrency, 8))
    config = ServerConfig(max_waiting=max(1024, args.num_prompts))
    app = create_app(core, config, model_dir=args.model)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, config))
    client = [sys.executable, "-m", "quickmoe", "bench", "serve", "--base-url", f"http://127.0.0.1:{port}",
              "--concurrency", str(args.concurrency), "--num-prompts", str(args.num_prompts),
              "--input-len", str(args.input_len), "--output-len", str(args.output_len)]
    report: dict = {}

    def drive() -> None:  # on a thread: the event loop (profiled) runs on the main thread
        while not server.started:
            time.sleep(0.05)
        t0, steps0 = time.monotonic(), core.steps
        report["result"] = subprocess.run(client, capture_output=True, text=True)
        report["seconds"], report["steps"] = time.monotonic() - t0, core.steps - steps0
        server.should_exit = True

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    server.run(sockets=[sock])
    if profiler is not None:
        profiler.disable()
    driver.join()
    result = report["result"]
    print(result.stdout[-3000:] or result.stderr[-3000:])
    print(f"step core: {report['steps'] / report['seconds']:.1f} steps/s against {1e3 / args.step_ms:.1f} asked; "
          f"behind its schedule {core.late_s:.2f} s in all")
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(40)
        print("--- by own time: the event loop's thread (on Python >= 3.12 cProfile sees every thread of the process)")
        print(out.getvalue())

if __name__ == "__main__":
    main()
