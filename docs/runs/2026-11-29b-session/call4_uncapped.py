"""quickmoe generate in this process with transfer.MAX_BATCH set from argv[1] (0: uncapped), faulthandler on; argv[3]
"quiet": Triton's and cuBLAS's background starts (threads that call the driver beside the load) not started."""
import faulthandler, sys, types
faulthandler.enable()
import quickmoe.checkpoint.transfer as transfer
import quickmoe.executor.model_runner as model_runner
cap = int(sys.argv[1])
transfer.MAX_BATCH = cap if cap > 0 else 10**9
if len(sys.argv) > 3 and sys.argv[3] == "quiet":
    model_runner.ModelRunner._starts_triton = lambda self: False
    model_runner.CublasStart = lambda *a, **k: types.SimpleNamespace(start=lambda: None)
    print("background starts off", flush=True)
from quickmoe.cli import main
sys.argv = ["quickmoe", "generate", sys.argv[2], "--device", "cuda", "--max-tokens", "2", "--prompt", "hi", "-q"]
sys.exit(main())
