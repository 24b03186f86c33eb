"""quickmoe's own start of the ranks, as a user runs it: `quickmoe generate -tp 2` on the embedded tiny model
(CPU, gloo), spawned by the command line before its imports or under torchrun, and LLM(tensor_parallel_size=2),
print the same greedy tokens as one process and exit 0 (the spawned rank stopped at exit); `quickmoe serve -tp 2`
(no DIR: LLM spawns the rank) stops both ranks with status 0 on SIGTERM, and exits non-zero with one line naming
the rank when its spawned rank is killed, never hangs; a split that fails is one line and leaves no rank behind."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
SMALL = ("--device", "cpu", "--max-model-len", "128", "--kv-cache-memory", "64MiB", "--max-num-seqs", "4")


def _generate(*extra: str, launcher: tuple[str, ...] = ()) -> list[list[int]]:
    from quickmoe.checkpoint.default_model import ensure_default_model

    model = str(ensure_default_model())  # a directory given: the command line spawns the ranks before its imports
    proc = subprocess.run([sys.executable, *launcher, "-m", "quickmoe", "generate", model, "-p", "hello there", "-p",
                           "a b c",
                           "--max-tokens", "8", "--temperature", "0", "--ignore-eos", "--json", "-q", *SMALL, *extra],
                          env=ENV, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line)["token_ids"] for line in proc.stdout.splitlines() if line.startswith("{")]


def test_generate_with_two_spawned_ranks_equals_one_process():
    one = _generate()
    assert len(one) == 2 and all(len(t) == 8 for t in one)
    assert _generate("-tp", "2") == one
    # under torchrun: its two ranks, rank 1 following inside LLM(...) and exiting 0 when rank 0 is done
    torchrun = ("-m", "torch.distributed.run", "--nproc-per-node", "2")
    assert _generate("-tp", "2", launcher=torchrun) == one


def _children(pid: int, frontends: bool = False) -> list[int]:
    """Spawned multiprocessing children of `pid` (not its resource tracker): the ranks it spawned, or with
    `frontends` its HTTP frontend (`quickmoe serve`'s, which runs in a process group of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        ppid, own_group = int(fields[1]), int(fields[2]) == int(entry.name)
        if ppid == pid and "spawn_main" in cmdline and own_group == frontends:
            found.append(int(entry.name))
    return found


def _serve_two_ranks() -> tuple[subprocess.Popen, queue.Queue, list[str], int]:
    """`quickmoe serve -tp 2` on the embedded model, ready and having answered one completion: (process, its stderr
    lines still to read, those read, the spawned rank's pid)."""
    proc = subprocess.Popen([sys.executable, "-m", "quickmoe", "serve", "--port", "0", "-tp", "2", *SMALL],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr] and lines.put(None), daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + 180
    url = None
    while url is None and time.monotonic() < deadline:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
        assert line is not None, "serve exited before it was ready:\n" + "".join(seen[-30:])
        seen.append(line)
        match = re.search(r"serving '.*' at (http://127\.0\.0\.1:\d+)", line)
        url = match.group(1) if match else None
    assert url is not None, "".join(seen[-30:])
    with httpx.Client(base_url=url, timeout=30, trust_env=False) as http:
        body = {"model": "quickmoe-tiny", "prompt": "x", "max_tokens": 4, "temperature": 0}
        assert http.post("/v1/completions", json=body).status_code == 200  # both ranks serve
    workers = _children(proc.pid)
    assert len(workers) == 1, workers
    return proc, lines, seen, workers[0]


def _rest(lines: queue.Queue, seen: list[str]) -> str:
    return "".join(seen) + "".join(iter(lambda: lines.get(timeout=5) or "", ""))


def test_serve_exits_non_zero_with_one_line_when_a_rank_dies():
    proc, lines, seen, worker = _serve_two_ranks()
    try:
        os.kill(worker, signal.SIGKILL)
        code = proc.wait(timeout=60)  # not a hang
        rest = _rest(lines, seen)
        assert code != 0
        assert re.search(r"tensor-parallel rank 1 \(pid \d+\) exited with code -9", rest), rest[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_sigterm_stops_both_ranks_with_status_0():
    proc, lines, seen, worker = _serve_two_ranks()
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, _rest(lines, seen)[-3000:]
        assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text()
        assert "exited with code" not in _rest(lines, seen)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_llm_api_with_two_ranks_and_its_shutdown(tmp_path):
    """LLM(DIR, tensor_parallel_size=2) in this process: the same greedy tokens, log-probabilities and prompt
    log-probabilities as one process; NCCL_NVLS_ENABLE=0
    in this process and the spawned rank; shutdown() stops the spawned rank (exit 0) and may be called again."""
    from quickmoe.checkpoint.default_model import ensure_default_model
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    opts = dict(device="cpu", dtype="float32", max_model_len=128, kv_cache_memory=64 << 20, max_num_seqs=4)
    params = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)
    prompts = [[1, 2, 3, 4], [5, 6]]
    model = ensure_default_model()
    with_logprobs = SamplingParams(max_tokens=3, temperature=0, ignore_eos=True, logprobs=2, prompt_logprobs=1)
    one = LLM(model, **opts)
    want = [o.token_ids for o in one.generate(prompts, params)]
    want_lp = one.generate(prompts[:1], with_logprobs)[0]
    llm = LLM(model, tensor_parallel_size=2, enable_expert_parallel=True, **opts)
    spawned = llm._ranks.spawned.processes
    for pid in (os.getpid(), spawned[0].pid):  # NVLink multicast off in every process quickmoe starts
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if pid != os.getpid() else [
            f"{k}={v}".encode() for k, v in os.environ.items()]
        assert b"NCCL_NVLS_ENABLE=0" in environ and b"NCCL_CUMEM_ENABLE=0" in environ, pid
    assert [o.token_ids for o in llm.generate(prompts, params)] == want
    got_lp = llm.generate(prompts[:1], with_logprobs)[0]  # the prompt rows' logits reach rank 0 too
    pairs = list(zip(want_lp.logprobs, got_lp.logprobs)) + list(zip(want_lp.prompt_logprobs[1:],
                                                                     got_lp.prompt_logprobs[1:]))
    assert len(pairs) == 3 + len(prompts[0]) - 1
    for w, g in pairs:
        assert w.token_id == g.token_id and abs(w.logprob - g.logprob) < 1e-4, (w, g)
    llm.shutdown()
    assert [p.exitcode for p in spawned] == [0]
    llm.shutdown()


def test_a_split_that_fails_is_one_line_and_leaves_no_rank_behind():
    """-tp 3 on 4 heads: the ranks spawned before the imports are killed, rank 0's error is the one line (exit 2)."""
    from quickmoe.checkpoint.default_model import ensure_default_model

    proc = subprocess.Popen([sys.executable, "-m", "quickmoe", "generate", str(ensure_default_model()), "-p", "x",
                             "-tp", "3", "-q", *SMALL], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    children: list[int] = []
    while proc.poll() is None and not children:
        children = _children(proc.pid)
        time.sleep(0.05)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and err.strip().splitlines() == [
        "error: num_attention_heads = 4: expected a multiple of 3 (split evenly across 3 ranks); choose a "
        "tensor-parallel size that divides it"], err
    time.sleep(0.5)
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()], children
